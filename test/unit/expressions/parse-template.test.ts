import t from 'tap'
import { ExpressionError, parseTemplate } from '../../../src/expressions/index.js'

function errorOf(source: string): ExpressionError {
  try {
    parseTemplate(source)
  } catch (err) {
    if (err instanceof ExpressionError) return err
    throw err
  }
  throw new Error(`expected ${source} to fail`)
}

t.test('literal text without expressions is one part', async (t) => {
  t.same(parseTemplate('plain { text } here').parts, ['plain { text } here'])
  t.same(parseTemplate('').parts, [])
  t.equal(parseTemplate('abc').single, null)
})

t.test('spaces are optional around every element', async (t) => {
  for (const source of ['{{tok_1}}', '{{ tok_1 }}', '{{\ttok_1\n}}', '{{   tok_1   }}']) {
    const { single } = parseTemplate(source)
    t.equal(single?.tokenId, 'tok_1', source)
    t.same(single?.filters, [], source)
  }
  const tight = parseTemplate("{{tok_1|json:'$.a'|last4}}").single
  const loose = parseTemplate("{{ tok_1 | json : '$.a' | last4 }}").single
  t.same(tight?.filters.map((f) => f.name), ['json', 'last4'])
  t.same(loose?.filters.map((f) => f.name), ['json', 'last4'])
})

t.test('a string that is exactly one expression is single; anything around it is not', async (t) => {
  t.ok(parseTemplate('{{ abc }}').single)
  t.equal(parseTemplate(' {{ abc }}').single, null)
  t.equal(parseTemplate('{{ abc }}x').single, null)
  t.equal(parseTemplate('{{ abc }}{{ abc }}').single, null)
})

t.test('parts, offsets and distinct ids in order', async (t) => {
  const template = parseTemplate('a{{ one }}b{{ two|last4 }}{{ one }}')
  t.same(template.tokenIds, ['one', 'two'])
  t.equal(template.parts.length, 5)
  t.equal(template.parts[0], 'a')
  const first = template.parts[1]
  t.match(first, { tokenId: 'one', idPosition: 4, start: 1, end: 10 })
  t.equal(template.parts[2], 'b')
})

t.test('filters and their arguments', async (t) => {
  const source = `{{ abc | json: "$.a['b c'][2]" | reveal_last: 4 | slice: -4, 2 | slice: 1 | to_string | last4 }}`
  const at = (needle: string, from = 0) => source.indexOf(needle, from)
  const { single } = parseTemplate(source)
  t.same(single?.filters, [
    { name: 'json', position: at('json'), path: [{ key: 'a' }, { key: 'b c' }, { index: 2 }] },
    { name: 'reveal_last', position: at('reveal_last'), count: 4 },
    { name: 'slice', position: at('slice'), start: -4, length: 2 },
    { name: 'slice', position: at('slice', at('slice') + 1), start: 1, length: 1 },
    { name: 'to_string', position: at('to_string') },
    { name: 'last4', position: at('last4') },
  ])
})

t.test('quoted arguments take backslash escapes and either quote', async (t) => {
  const single = parseTemplate(String.raw`{{ abc | json: '$["it\'s"]' }}`).single
  t.same(single?.filters[0], { name: 'json', position: 9, path: [{ key: "it's" }] })
  const closing = parseTemplate(`{{ abc | json: '$["}}"]' }}`).single
  t.same(closing?.filters[0], { name: 'json', position: 9, path: [{ key: '}}' }] }, 'a }} inside a string does not close')
})

t.test('malformed expressions name the position and reason', async (t) => {
  const cases: [string, number, RegExp][] = [
    ['{{', 0, /unclosed expression/],
    ['x {{ abc', 2, /unclosed expression/],
    ['{{ abc | last4 ', 0, /unclosed expression/],
    ['{{ abc }', 0, /unclosed expression/],
    ['{{ }}', 3, /expected a token id/],
    ['{{}}', 2, /expected a token id/],
    ['{{ | last4 }}', 3, /expected a token id/],
    ['{{ ab }}', 3, /invalid token id: must be 3 to 400 characters/],
    [`{{ ${'a'.repeat(401)} }}`, 3, /must be 3 to 400/],
    ['{{ a/bc }}', 3, /must not contain "\/"/],
    ['{{ a{bc }}', 3, /must not contain "{"/],
    ['{{ abc def }}', 7, /expected '\|' or '}}', found "d"/],
    ['{{ abc | }}', 9, /expected a filter name/],
    ['{{ abc || last4 }}', 8, /expected a filter name/],
    ['{{ abc | nope }}', 9, /unknown filter "nope"; expected one of json, last4/],
    ['{{ abc | JSON }}', 9, /unknown filter "JSON"/],
    ['{{ abc | last4: 1 }}', 9, /'last4' takes no arguments, got 1/],
    ['{{ abc | to_string: 1 }}', 9, /'to_string' takes no arguments/],
    ['{{ abc | json }}', 9, /'json' takes 1 argument, got 0/],
    ["{{ abc | json: '$', '$' }}", 9, /'json' takes 1 argument, got 2/],
    ['{{ abc | json: 1 }}', 15, /'json' needs a quoted string/],
    ["{{ abc | json: 'a.b' }}", 16, /must start with '\$'/],
    ["{{ abc | json: '$.' }}", 18, /expected a key after '\.'/],
    ["{{ abc | json: '$.a[' }}", 20, /quoted key or a non-negative index/],
    ["{{ abc | json: '$[-1]' }}", 18, /non-negative index/],
    ["{{ abc | json: '$[1' }}", 19, /expected '\]' after an index/],
    [`{{ abc | json: "$['a" }}`, 18, /unterminated quoted key/],
    [`{{ abc | json: "$['a'x" }}`, 21, /expected '\]' after a quoted key/],
    ["{{ abc | json: '$.*' }}", 18, /wildcards/],
    ["{{ abc | json: '$..a' }}", 18, /expected a key/],
    ["{{ abc | json: '$x' }}", 17, /unexpected "x"/],
    ['{{ abc | reveal_last }}', 9, /'reveal_last' takes 1 argument, got 0/],
    ['{{ abc | reveal_last: }}', 22, /expected a quoted string or an integer/],
    ["{{ abc | reveal_last: '4' }}", 22, /needs an integer argument/],
    ['{{ abc | reveal_last: -1 }}', 22, /non-negative integer/],
    ['{{ abc | reveal_last: 1, 2 }}', 9, /takes 1 argument, got 2/],
    ['{{ abc | reveal_last: 1.5 }}', 23, /expected '\|' or '}}', found "\."/],
    ['{{ abc | reveal_last: 9999999999 }}', 22, /too large/],
    ['{{ abc | slice }}', 9, /'slice' takes 1 to 2 arguments, got 0/],
    ['{{ abc | slice: 1, 2, 3 }}', 9, /takes 1 to 2 arguments, got 3/],
    ['{{ abc | slice: 1, -2 }}', 19, /non-negative integer/],
    ["{{ abc | slice: 'a' }}", 16, /needs an integer argument/],
    ['{{ abc | slice: 1, }}', 19, /expected a quoted string or an integer/],
    ["{{ abc | json: 'unterminated }}", 15, /unterminated string argument/],
    ['{{ abc | slice: - }}', 16, /expected a quoted string or an integer/],
  ]
  for (const [source, position, reason] of cases) {
    const err = errorOf(source)
    t.equal(err.position, position, `${source} position`)
    t.match(err.reason, reason, `${source} reason`)
    t.match(err.message, `position ${position}`, `${source} message`)
    t.equal(err.pointer, undefined)
  }
})

t.test('the first malformed expression in a string is reported', async (t) => {
  const err = errorOf('ok {{ fine }} then {{ ab }}')
  t.equal(err.position, 22)
})

t.test('a long bad filter name is cut short in the reason', async (t) => {
  const err = errorOf(`{{ abc | ${'x'.repeat(500)} }}`)
  t.ok(err.reason.length < 200)
})

t.test('hostile input is handled in one pass', async (t) => {
  // Inputs that make backtracking patterns explode; here each must simply finish.
  t.equal(errorOf('{{'.repeat(50_000)).position, 0)
  t.match(errorOf(`{{ ${'a'.repeat(200_000)}`).reason, /unclosed/)
  t.match(errorOf(`{{ abc | json: '${'\\'.repeat(100_000)} }}`).reason, /unterminated/)
  const many = parseTemplate('{{ abc }}-'.repeat(20_000))
  t.equal(many.parts.length, 40_000)
  t.same(many.tokenIds, ['abc'])
  const distinct = parseTemplate(Array.from({ length: 20_000 }, (_, i) => `{{ id_${i} }}`).join(''))
  t.equal(distinct.tokenIds.length, 20_000)
})
