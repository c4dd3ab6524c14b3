import t from 'tap'
import type { AppError } from '../../../src/errors/index.js'
import { buildDestination } from '../../../src/egress/destination-url.js'

const strict = { allowHttp: false, allowPrivate: false }
const relaxed = { allowHttp: true, allowPrivate: true }

t.test('concatenates base (trailing / stripped), sub-path and query', async (t) => {
  const cases: [string, string, string, string, string][] = [
    // base, subPath, rawQuery, origin, path
    ['https://api.example.com', '', '', 'https://api.example.com', '/'],
    ['https://api.example.com/', '', '', 'https://api.example.com', '/'],
    ['https://api.example.com/v1/', '/users/7', 'a=1&b=%20', 'https://api.example.com', '/v1/users/7?a=1&b=%20'],
    ['https://api.example.com/v1', '/', '', 'https://api.example.com', '/v1/'],
    ['https://api.example.com:8443/v1', '/x', '', 'https://api.example.com:8443', '/v1/x'],
    ['HTTPS://API.Example.COM/v1', '/x', '', 'https://api.example.com', '/v1/x'],
    ['https://api.example.com/v1?key=k', '/x', 'q=1', 'https://api.example.com', '/v1/x?key=k&q=1'],
    ['https://api.example.com/v1?key=k', '', '', 'https://api.example.com', '/v1?key=k'],
    // Sent untouched: no re-encoding of characters WHATWG would escape in a query.
    ['https://api.example.com', '/a/./b', "q='x'", 'https://api.example.com', "/a/./b?q='x'"],
    ['https://api.example.com', '/a..b/..c/%2e', '', 'https://api.example.com', '/a..b/..c/%2e'],
    ['https://api.example.com', '/a;v=1/b..;c/x.;y', '', 'https://api.example.com', '/a;v=1/b..;c/x.;y'],
    ['https://[2606:4700::1]/p', '/x', '', 'https://[2606:4700::1]', '/p/x'],
    ['https://8.8.8.8', '/x', '', 'https://8.8.8.8', '/x'],
  ]
  for (const [base, sub, query, origin, path] of cases) {
    const d = buildDestination(base, sub, query, strict)
    t.same({ origin: d.origin, path: d.path }, { origin, path }, `${base} + ${sub} ? ${query}`)
  }
  t.equal(buildDestination('http://127.0.0.1:9/x', '/y', '', relaxed).path, '/x/y', 'relaxed policy allows http and loopback')
})

t.test('refuses every form that could leave the base or the policy', async (t) => {
  const cases: [string, string, string, string?][] = [
    // base, subPath, rawQuery, why
    ['https://h/api', '/..', ''],
    ['https://h/api', '/../admin', ''],
    ['https://h/api', '/a/../../admin', ''],
    ['https://h/api', '/%2e%2e/admin', ''],
    ['https://h/api', '/%2E%2E/admin', ''],
    ['https://h/api', '/.%2E/admin', ''],
    ['https://h/api', '/%2e./admin', ''],
    ['https://h/api', '/..%2fadmin', ''],
    ['https://h/api', '/..%5Cadmin', ''],
    ['https://h/api', '/a%2f..%2f..%2fadmin', ''],
    // Dot segments with path parameters: Tomcat/Spring resolve `..;x` as `..`.
    ['https://h/api', '/..;/admin', ''],
    ['https://h/api', '/..;jsessionid=1/admin', ''],
    ['https://h/api', '/a/..;', ''],
    ['https://h/api', '/.;/..;/admin', ''],
    ['https://h/api', '/%2e%2e;/admin', ''],
    ['https://h/api', '/..%3b/admin', ''],
    ['https://h/api', '/%2E.%3B/admin', ''],
    ['https://h/api', '/..;%2fadmin', ''],
    ['https://h/api', '/a%2f..;%2fadmin', ''],
    ['https://h/api/..;/admin', '', ''],
    ['https://h/api', '//evil.example/x', ''],
    ['https://h', '//evil.example', ''],
    ['https://h/api', '/a//b', ''],
    ['https://h/api', '\\\\evil.example', ''],
    ['https://h/api', '/a\\b', ''],
    ['https://h/api', 'relative', ''],
    ['https://h/api', '/a#frag', ''],
    ['https://h/api', '/a b', ''],
    ['https://h/api', '/x', 'a=1#frag'],
    ['https://h/api/../admin', '', ''],
    ['https://h/api/%2e%2e/admin', '', ''],
    ['https://h//evil.example', '', ''],
    ['https:\\\\evil.example', '', ''],
    ['https:/\\evil.example', '', ''],
    ['https://h\\@evil.example', '', ''],
    ['https://user:pass@h/api', '', ''],
    [`https://${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.${'e'.repeat(10)}`, '', '', 'longer than 253'],
    ['https://user@h/api', '', ''],
    ['https://@h/api', '', ''],
    ['https://h#frag', '', ''],
    ['https:h/api', '', ''],
    ['https:/h/api', '', ''],
    ['https:////h/api', '', ''],
    ['https:///h', '', ''],
    ['//h/api', '', ''],
    ['/api', '', ''],
    ['h/api', '', ''],
    ['http://h/api', '', '', 'http without allowHttp'],
    ['ftp://h/api', '', ''],
    ['file:///etc/passwd', '', ''],
    ['javascript:alert(1)', '', ''],
    [' https://h/api', '', ''],
    ['https://h/a\tb', '', ''],
    ['https://127.0.0.1', '', ''],
    ['https://127.1', '', ''],
    ['https://0x7f000001', '', ''],
    ['https://2130706433', '', ''],
    ['https://017700000001', '', ''],
    ['https://0.0.0.0', '', ''],
    ['https://0', '', ''],
    ['https://%31%32%37.0.0.1', '', ''],
    ['https://[::1]', '', ''],
    ['https://[::]', '', ''],
    ['https://[::ffff:127.0.0.1]', '', ''],
    ['https://[::ffff:7f00:1]', '', ''],
    ['https://[::127.0.0.1]', '', ''],
    ['https://[fd00::1]', '', ''],
    ['https://[fe80::1]', '', ''],
    ['https://169.254.169.254/latest/meta-data', '', ''],
    ['https://10.0.0.1', '', ''],
    ['https://172.16.0.1', '', ''],
    ['https://192.168.1.1', '', ''],
    ['https://100.64.0.1', '', ''],
    ['https://224.0.0.1', '', ''],
    ['https://255.255.255.255', '', ''],
  ]
  for (const [base, sub, query, why] of cases) {
    t.throws(() => buildDestination(base, sub, query, strict), { code: 'destination_refused', status: 400 }, why ?? `${base} + ${sub} ? ${query}`)
  }
})

t.test('a missing or unparseable URL is bad_request', async (t) => {
  for (const base of [undefined, '', '   ', 'https://exa%20mple.com', 'https://[::1', 'https://h:99999/']) {
    t.throws(() => buildDestination(base, '', '', strict), { code: 'bad_request', status: 400 }, String(base))
  }
})

t.test('refusals keep a detail the caller can read', async (t) => {
  const err = catchError(() => buildDestination('https://user@h', '', '', strict)) as AppError
  t.match(err.detail, /Credentials/)
  const literal = catchError(() => buildDestination('https://127.1', '', '', strict)) as AppError
  t.match(literal.detail, /127\.0\.0\.1/)
  t.ok(literal.cause, 'keeps the policy error as cause')
})

function catchError(fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  return undefined
}
