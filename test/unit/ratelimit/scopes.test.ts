import t from 'tap'
import { selectRouteScope } from '../../../src/ratelimit/scopes.js'

t.test('route scopes', async (t) => {
  const cases: [string, string, string | undefined][] = [
    ['POST', '/tokens/search', 'tokens_search'],
    ['GET', '/tokens', 'tokens_list'],
    ['HEAD', '/tokens', 'tokens_list'],
    ['POST', '/tokens', 'tokens_create'],
    ['POST', '/tokenize', 'tokens_create'],
    ['GET', '/v2/tokens', 'tokens_list'],
    ['POST', '/v2/tokens/search', 'tokens_search'],
    ['POST', '/v2/tokens', undefined],
    ['GET', '/portal', 'portal'],
    ['POST', '/portal/login', 'portal'],
    ['GET', '/portal/a/b', 'portal'],
    ['GET', '/portalx', undefined],
    ['GET', '/tokens/search', undefined],
    ['GET', '/tokens/tok_1', undefined],
    ['DELETE', '/tokens', undefined],
    ['POST', '/detokenize', undefined],
    ['GET', '/healthz', undefined],
  ]
  for (const [method, path, scope] of cases) t.equal(selectRouteScope(method, path), scope, `${method} ${path}`)
})

t.test('paths are compared the way the router matches them', async (t) => {
  t.equal(selectRouteScope('post', '/Tokens/Search/'), 'tokens_search')
  t.equal(selectRouteScope('GET', '/tokens//'), 'tokens_list')
  t.equal(selectRouteScope('GET', '/PORTAL/x'), 'portal')
})
