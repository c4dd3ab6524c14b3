import t from 'tap'
import { hasTraversal } from '../../../src/egress/path-traversal.js'

t.test('every spelling of a parent segment is refused', async (t) => {
  for (const path of [
    '/..',
    '/a/../b',
    '/%2e%2e/admin',
    '/.%2E/admin',
    '/..;/admin',
    '/..;jsessionid=1/admin',
    '/.;/admin',
    '/%2e%2e%3b/admin',
    '/..%00/admin',
    '/..%00.json',
    '/a%2f..%2fadmin',
    '/a%5c..%5cadmin',
    '/%252e%252e/admin',
    '/%25252e%25252e/admin',
    '/%252e%252e%253b/admin',
    '/%c0%ae%c0%ae/admin',
    '/%C0%AE%C0%AE%c0%afadmin',
    '/%e0%80%ae%e0%80%ae/admin',
    '/%u002e%u002e/admin',
    '/%ef%bc%8e%ef%bc%8e/admin',
    '/a%e2%88%95..%e2%88%95admin',
    '/../',
    '/.. /admin',
    '/..%20/admin',
    '/.../admin',
    '/a//b',
    '/a/%2f/b',
    '/a%252f%252fb',
  ]) {
    t.ok(hasTraversal(path), path)
  }
})

t.test('ordinary paths pass, dots and parameters included', async (t) => {
  for (const path of ['', '/', '/a/b/', '/a/./b', '/a..b/..c/%2e', '/a;v=1/b..;c/x.;y', '/file.json', '/v1/users/7', '/a%2fb', '/caf%C3%A9', '/%25', '/100%25/x', '/a/.well-known/x']) {
    t.notOk(hasTraversal(path), path)
  }
})
