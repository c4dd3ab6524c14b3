import t from 'tap'
import {
  compileValue,
  ExpressionError,
  findTokenIds,
  MAX_DEPTH,
  renderText,
  renderValue,
  type TokenLookup,
} from '../../../src/expressions/index.js'

const tokens: Record<string, unknown> = {
  tok_card: { number: '4242424242424242', expiration_month: 12, cvc: '123', tags: ['a', 'b'], 'odd key': { x: 1 } },
  tok_ssn: '123-45-6789',
  tok_num: 42,
  tok_bool: true,
  tok_null: null,
  tok_list: [1, 'two', { three: 3 }],
}

class UnknownToken extends Error {}

const lookup: TokenLookup = (id) => {
  if (!Object.hasOwn(tokens, id)) throw new UnknownToken(id)
  return tokens[id]
}

function expressionError(fn: () => unknown): ExpressionError {
  try {
    fn()
  } catch (err) {
    if (err instanceof ExpressionError) return err
    throw err
  }
  throw new Error('expected an ExpressionError')
}

t.test('a string that is exactly one expression keeps the JSON type', async (t) => {
  t.same(renderValue('{{ tok_card }}', lookup), tokens.tok_card)
  t.equal(renderValue('{{ tok_num }}', lookup), 42)
  t.equal(renderValue('{{ tok_bool }}', lookup), true)
  t.equal(renderValue('{{ tok_null }}', lookup), null)
  t.same(renderValue('{{ tok_list }}', lookup), [1, 'two', { three: 3 }])
  t.equal(renderValue("{{ tok_card | json: '$.expiration_month' }}", lookup), 12)
})

t.test('inside a longer string the value is interpolated as text', async (t) => {
  t.equal(renderValue('n={{ tok_num }}', lookup), 'n=42')
  t.equal(renderValue('{{ tok_bool }}!', lookup), 'true!')
  t.equal(renderValue('[{{ tok_null }}]', lookup), '[]')
  t.equal(renderValue(' {{ tok_list }}', lookup), ' [1,"two",{"three":3}]')
  t.equal(renderValue('{{ tok_ssn }}{{ tok_num }}', lookup), '123-45-678942')
})

t.test('renderValue walks arrays and objects; keys and non-strings are left alone', async (t) => {
  const body = {
    '{{ tok_ssn }}': 'key is not evaluated',
    card: { number: "{{ tok_card | json: '$.number' }}", cvc: "{{tok_card|json:'$.cvc'}}" },
    list: ['{{ tok_num }}', 7, false, null, 'plain'],
    nested: [[['x {{ tok_ssn | last4 }}']]],
  }
  t.same(renderValue(body, lookup), {
    '{{ tok_ssn }}': 'key is not evaluated',
    card: { number: '4242424242424242', cvc: '123' },
    list: [42, 7, false, null, 'plain'],
    nested: [[['x 6789']]],
  })
  t.equal(body.card.number, "{{ tok_card | json: '$.number' }}", 'the input is not mutated')
})

t.test('a value without expressions comes back as the same object', async (t) => {
  const body = { a: [1, { b: 'text { not } an expression' }], c: null }
  t.equal(renderValue(body, lookup), body)
  const mixed = { same: { x: 1 }, changed: '{{ tok_num }}' }
  const out = renderValue(mixed, lookup) as typeof mixed
  t.equal(out.same, mixed.same, 'untouched subtrees are shared')
  t.equal(out.changed, 42)
})

t.test('a key named __proto__ stays an own property', async (t) => {
  const body = JSON.parse('{"__proto__": {"polluted": "{{ tok_num }}"}, "x": "{{ tok_num }}"}') as unknown
  const out = renderValue(body, lookup) as Record<string, unknown>
  t.equal(Object.getPrototypeOf(out), Object.prototype)
  t.same(Object.getOwnPropertyDescriptor(out, '__proto__')?.value, { polluted: 42 })
  t.equal(({} as Record<string, unknown>).polluted, undefined)
})

t.test('renderText interpolates every expression as text, even a lone one', async (t) => {
  t.equal(renderText('{{ tok_num }}', lookup), '42')
  t.equal(renderText('{{ tok_card }}', lookup), JSON.stringify(tokens.tok_card))
  t.equal(renderText("<n>{{ tok_card | json: '$.number' | reveal_last: 4 }}</n>", lookup), '<n>XXXXXXXXXXXX4242</n>')
  t.equal(renderText('card={{tok_card|json:"$.number"}}&ssn={{ tok_ssn }}', lookup), 'card=4242424242424242&ssn=123-45-6789')
  t.equal(renderText('Bearer abc', () => t.fail('no lookup without {{')), 'Bearer abc')
})

t.test('the lookup is the caller’s: its errors pass through unchanged', async (t) => {
  const thrown = (fn: () => unknown) => {
    try {
      fn()
    } catch (err) {
      return err
    }
  }
  for (const err of [thrown(() => renderValue({ a: '{{ tok_missing }}' }, lookup)), thrown(() => renderText('x {{ tok_missing }}', lookup))]) {
    t.ok(err instanceof UnknownToken)
    t.equal((err as Error).message, 'tok_missing')
  }
})

t.test('filters', async (t) => {
  const r = (expr: string) => renderValue(`{{ ${expr} }}`, lookup)
  t.equal(r('tok_ssn | last4'), '6789')
  t.equal(r('tok_num | last4'), '42')
  t.equal(r('tok_null | last4'), null)
  t.equal(r('tok_ssn | reveal_last: 4'), 'XXXXXXX6789')
  t.equal(r('tok_ssn | reveal_last: 0'), 'XXXXXXXXXXX')
  t.equal(r('tok_ssn | reveal_last: 50'), '123-45-6789')
  t.equal(r('tok_ssn | slice: 0, 3'), '123')
  t.equal(r('tok_ssn | slice: 4'), '4', 'length defaults to 1')
  t.equal(r('tok_ssn | slice: -4, 4'), '6789')
  t.equal(r('tok_ssn | slice: -40, 3'), '123')
  t.equal(r('tok_ssn | slice: 20, 3'), '')
  t.equal(r('tok_num | slice: 0, 1'), '4')
  t.same(r('tok_list | slice: 1, 2'), ['two', { three: 3 }])
  t.equal(r('tok_num | to_string'), '42')
  t.equal(r('tok_null | to_string'), '')
  t.equal(r('tok_list | to_string'), '[1,"two",{"three":3}]')
  t.equal(r('tok_ssn | to_string'), '123-45-6789')
  t.equal(r("tok_card | json: '$' | json: '$.tags[1]'"), 'b')
  t.equal(r(`tok_card | json: "$['odd key'].x"`), 1)
  t.equal(r("tok_card | json: '$.odd key.x'"), 1, 'dot keys run to the next . or [')
  t.equal(r("tok_list | json: '$[2].three'"), 3)
  t.equal(r("tok_card | json: '$.missing'"), null, 'a missing path is null')
  t.equal(r("tok_card | json: '$.tags[5]'"), null)
  t.equal(r("tok_card | json: '$.number.deeper'"), null)
  t.equal(r("tok_card | json: '$.tags.length'"), null, 'arrays have no keys')
  t.equal(r("tok_card | json: '$.toString'"), null, 'inherited properties are invisible')
  t.equal(r("tok_card | json: '$.number' | slice: 0, 6 | to_string"), '424242')
  t.equal(renderValue("x{{ tok_card | json: '$.missing' }}y", lookup), 'xy')
})

t.test('filters applied to the wrong kind of value fail with position and pointer', async (t) => {
  const err = expressionError(() => renderValue({ a: ['ok', 'x {{ tok_card | last4 }}'] }, lookup))
  t.equal(err.position, 16)
  t.equal(err.pointer, '/a/1')
  t.match(err.reason, "filter 'last4' needs a string or number, got object")
  t.notMatch(err.message, '4242', 'the data never appears in the error')
  t.match(expressionError(() => renderValue('{{ tok_list | reveal_last: 2 }}', lookup)).reason, 'got array')
  t.match(expressionError(() => renderValue('{{ tok_bool | slice: 1 }}', lookup)).reason, "'slice' needs a string, number or array, got boolean")
  t.match(expressionError(() => renderText('{{ tok_card | last4 }}', lookup)).reason, 'got object')
})

t.test('parse errors inside a JSON value carry a pointer to the string', async (t) => {
  const err = expressionError(() => findTokenIds({ 'a/b': [{ '~c': '{{ tok_ssn | nope }}' }] }))
  t.equal(err.pointer, '/a~1b/0/~0c')
  t.equal(err.position, 13)
  t.match(err.message, /^Invalid expression at \/a~1b\/0\/~0c position 13: unknown filter/)
  t.equal(expressionError(() => findTokenIds('{{ ab }}')).message, 'Invalid expression at / position 3: invalid token id: must be 3 to 400 characters')
  t.equal(expressionError(() => renderValue({ x: '{{' }, lookup)).pointer, '/x')
})

t.test('findTokenIds collects distinct ids from strings only', async (t) => {
  const body = { '{{ key_id }}': ['{{ tok_a }} {{ tok_b }}', { x: '{{ tok_a | last4 }}' }], n: 1, s: 'no' }
  t.same([...findTokenIds(body)], ['tok_a', 'tok_b'])
  t.same([...findTokenIds({ body: 'a={{ tok_a }}', headers: { Authorization: 'Bearer {{ tok_c }}' } })], ['tok_a', 'tok_c'])
  t.same([...findTokenIds(null)], [])
  t.same([...findTokenIds('plain')], [])
})

t.test('at most maxTokens distinct tokens (default 100)', async (t) => {
  const ids = (n: number) => Array.from({ length: n }, (_, i) => `{{ tok_${i} }}`)
  t.equal(findTokenIds(ids(100)).size, 100)
  t.equal(findTokenIds([...ids(100), ...ids(100)]).size, 100, 'repeats do not count')
  const err = expressionError(() => findTokenIds(ids(101)))
  t.match(err.reason, 'too many tokens: at most 100 distinct tokens may be referenced')
  t.equal(err.pointer, '/100')
  t.equal(findTokenIds(ids(3), { maxTokens: 3 }).size, 3)
  const three = 'a {{ tok_1 }} b {{ tok_2 }} c {{ tok_3 }}'
  const inOne = expressionError(() => findTokenIds({ s: three }, { maxTokens: 2 }))
  t.equal(inOne.position, three.indexOf('{{ tok_3'), 'points at the first expression over the limit')
  t.equal(inOne.pointer, '/s')
  t.ok(Array.isArray(renderValue(ids(150), () => 1)), 'renderValue alone sets no limit')
})

t.test('compileValue parses once for ids and rendering', async (t) => {
  const compiled = compileValue({ a: '{{ tok_num }}', b: ['{{ tok_ssn | last4 }}'] })
  t.same([...compiled.tokenIds], ['tok_num', 'tok_ssn'])
  const seen: string[] = []
  const out = compiled.render((id) => {
    seen.push(id)
    return lookup(id)
  })
  t.same(out, { a: 42, b: ['6789'] })
  t.same(seen, ['tok_num', 'tok_ssn'])
  t.same(compiled.render(() => 'x'), { a: 'x', b: ['x'] }, 'renders again with another lookup')
})

t.test('nesting deeper than MAX_DEPTH is refused, not a stack overflow', async (t) => {
  let deep: unknown = 'x'
  for (let i = 0; i < MAX_DEPTH + 1; i++) deep = [deep]
  t.match(expressionError(() => findTokenIds(deep)).reason, `nested more than ${MAX_DEPTH} levels`)
  let ok: unknown = '{{ tok_num }}'
  for (let i = 0; i < MAX_DEPTH - 1; i++) ok = { k: ok }
  t.same([...findTokenIds(ok)], ['tok_num'])
})
