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

t.test('whatever Unicode compatibility normalization (NFKC) folds into a dot, separator or parameter is refused', async (t) => {
  for (const path of [
    '/%e2%80%a4%e2%80%a4/admin', // U+2024 one dot leader
    '/%e2%80%a5/admin', // U+2025 two dot leader, `..` in one character
    '/base/v1/%E2%80%A5/admin',
    '/%e2%80%a6/admin', // U+2026 horizontal ellipsis, `...`
    '/%ef%b8%b0/admin', // U+FE30 presentation form of U+2025
    '/%ef%b9%92%ef%b9%92/admin', // U+FE52 small full stop
    '/.%ef%bc%8e/admin', // U+FF0E beside a literal dot
    '/a%ef%bc%bc..%ef%bc%bcadmin', // U+FF3C fullwidth reverse solidus
    '/a%ef%b9%a8..%ef%b9%a8admin', // U+FE68 small reverse solidus
    '/a%ef%bc%8f%ef%bc%8fb', // U+FF0F fullwidth solidus, an empty segment
    '/..%ef%bc%9bx/admin', // U+FF1B fullwidth semicolon: `..;x`
    '/..%cd%be/admin', // U+037E Greek question mark, canonically `;`
    '/%ef%bc%852e%ef%bc%852e/admin', // U+FF05 fullwidth percent sign spells `%2e%2e`
    '/..%e3%80%80/admin', // U+3000 ideographic space: `.. `
    '/%u2025/admin',
    '/%25e2%2580%25a5/admin',
    '/%2525e2%252580%2525a5/admin',
    '/%e0%80%ae%e0%80%ae%c0%af', // overlong UTF-8 of any kind, not only a listed one
    '/a%e0%81%9c..%e0%81%9cadmin',
  ]) {
    t.ok(hasTraversal(path), path)
  }
})

t.test('control characters are refused: WHATWG URL parsing strips tab, CR and LF out of a dot segment', async (t) => {
  for (const path of ['/..%09/admin', '/.%0a./admin', '/%0d../admin', '/.%09%2e/admin', '/..%2509/admin', '/a%0ab', '/a%1fb', '/..%7f/admin', '/..%c2%85/admin']) {
    t.ok(hasTraversal(path), path)
  }
})

t.test('ordinary paths pass, dots and parameters included', async (t) => {
  for (const path of ['', '/', '/a/b/', '/a/./b', '/a..b/..c/%2e', '/a;v=1/b..;c/x.;y', '/file.json', '/v1/users/7', '/a%2fb', '/caf%C3%A9', '/%25', '/100%25/x', '/a/.well-known/x',
    '/caf%E9', '/%C0la', '/na%C3%AFve', '/v1/%e2%80%a6x/y', '/%ef%bc%8e/x', '/%e2%91%a0.', '/%ef%bc%85']) {
    t.notOk(hasTraversal(path), path)
  }
})
