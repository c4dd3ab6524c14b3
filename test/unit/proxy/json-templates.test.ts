import t from 'tap'
import { ExpressionError } from '../../../src/expressions/index.js'
import { planJson } from '../../../src/proxy/plugins/detokenize/json-templates.js'
import { TokenBudget } from '../../../src/proxy/plugins/detokenize/token-budget.js'
import { AppError } from '../../../src/errors/index.js'

const data: Record<string, unknown> = { tok_s: 'abc', tok_n: 7, tok_o: { k: [1, 'x'] }, tok_q: 'a"b\\c\n' }
const lookup = (id: string) => {
  if (!(id in data)) throw new Error(`unknown ${id}`)
  return data[id]
}
const render = (text: string, max = 100) => {
  const plan = planJson(text, new TokenBudget(max))
  return plan === null ? null : plan(lookup)
}

t.test('only value literals with expressions change; everything else stays byte for byte', async (t) => {
  t.equal(render('{"a": 1.50, "b": "x"}'), null, 'nothing to do')
  t.equal(render('{ "a" : "{{tok_n}}" ,"b":[ "{{ tok_o }}", 1e3 ] }'), '{ "a" : 7 ,"b":[ {"k":[1,"x"]}, 1e3 ] }')
  t.equal(render('["{{tok_s}}-{{tok_n}}", "{{tok_q}}"]'), '["abc-7", "a\\"b\\\\c\\n"]')
  t.equal(render('"{{tok_s}}"'), '"abc"', 'a top-level string')
  t.equal(render('{"{{tok_s}}": "{{tok_s}}", "k": {"{{tok_n}}": 1}}'), '{"{{tok_s}}": "abc", "k": {"{{tok_n}}": 1}}', 'keys are never evaluated')
  t.equal(render('{"a\\"{{": "q\\\\", "b": "{{tok_s}}\\"}"}'), '{"a\\"{{": "q\\\\", "b": "abc\\"}"}', 'escaped quotes do not end a string')
  t.equal(render('{"a": {}, "b": [], "c": [{}, {"d": "{{tok_n}}"}]}'), '{"a": {}, "b": [], "c": [{}, {"d": 7}]}')
  t.equal(render('{"big": 12345678901234567890, "s": "{{tok_s}}"}'), '{"big": 12345678901234567890, "s": "abc"}')
})

t.test('errors are located with a JSON pointer', async (t) => {
  const at = (text: string, max?: number) => {
    try {
      render(text, max)
    } catch (err) {
      return err
    }
    return undefined
  }
  const err = at('{"a": [1, {"b/c~": "{{ tok_s | nope }}"}]}')
  t.ok(err instanceof ExpressionError)
  t.equal((err as ExpressionError).pointer, '/a/1/b~1c~0')
  const many = at('{"x": ["{{tok_s}}", "{{tok_n}}", "{{tok_s}}", "{{tok_o}}"]}', 2)
  t.match((many as ExpressionError).reason, /too many tokens/)
  t.equal((many as ExpressionError).pointer, '/x/3')
  const renderErr = at('{"k": {"z": "{{ tok_o | last4 }}"}}')
  t.equal((renderErr as ExpressionError).pointer, '/k/z', 'render-time errors are located too')
  const invalid = at('{"a": {{tok_n}}}')
  t.ok(invalid instanceof AppError && invalid.code === 'bad_request', 'not JSON: 400')
  t.notMatch((invalid as AppError).message, /tok_n/, 'the input is not quoted')
})

t.test('a deep body with many expressions is planned without a copy of its path per expression', async (t) => {
  // 200,000 levels and 4,000 expressions (456 KB): a path kept per expression held 8e8 entries
  // and the process died of it; the path is now found again only for an error.
  const depth = 200_000
  const sites = 4_000
  const text = '['.repeat(depth) + Array(sites).fill('"{{tok_s}}"').join(',') + ']'.repeat(depth)
  const out = render(text)
  t.equal(out, '['.repeat(depth) + Array(sites).fill('"abc"').join(',') + ']'.repeat(depth))
  const last = '['.repeat(depth) + Array(sites).fill('"{{tok_s}}"').join(',') + ',"{{ tok_o | last4 }}"' + ']'.repeat(depth)
  try {
    render(last)
    t.fail('the last expression fails to render')
  } catch (err) {
    t.equal((err as ExpressionError).pointer, '/0'.repeat(depth - 1) + `/${sites}`, 'its pointer is still found')
  }
})
