import t from 'tap'
import { ValidationError } from '../../../src/errors/index.js'
import { parseSearchQuery, SEARCH_TERM_LIMITS } from '../../../src/vault/search-query.js'

const refusal = (query: string): string | undefined => {
  try {
    parseSearchQuery(query)
    return undefined
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err
    return err.errors?.query?.[0]
  }
}

t.test('metadata keys: any key the API stores can be named', async (t) => {
  t.same(parseSearchQuery('metadata.a.b:1 metadata.ü:2').metadata, { 'a.b': ['1'], ü: ['2'] })
  t.same(parseSearchQuery('metadata." k ":" v " metadata."a:b":x metadata."q\\"uote":y').metadata, { ' k ': [' v '], 'a:b': ['x'], 'q"uote': ['y'] })
  t.same(Object.keys(parseSearchQuery('metadata.__proto__:x').metadata), ['__proto__'])
})

t.test('a term given twice counts once', async (t) => {
  const terms = parseSearchQuery(`${'container:/a/ '.repeat(400)}data:x data:x metadata.k:v metadata.k:v`)
  t.same(terms.containers, ['/a/'])
  t.same(terms.data, ['x'])
  t.same(terms.metadata.k, ['v'])
})

t.test('more distinct terms than a token can match are a 400 naming query', async (t) => {
  const many = (field: string, n: number) => Array.from({ length: n }, (_, i) => `${field}:v${i}`).join(' ')
  t.equal(refusal(many('container', SEARCH_TERM_LIMITS.containers)), undefined)
  t.equal(refusal(many('container', SEARCH_TERM_LIMITS.containers + 1)), `at most ${SEARCH_TERM_LIMITS.containers} distinct container terms`)
  t.equal(refusal(many('data', SEARCH_TERM_LIMITS.data + 1)), `at most ${SEARCH_TERM_LIMITS.data} distinct data terms`)
  t.equal(refusal(many('id', SEARCH_TERM_LIMITS.ids + 1)), `at most ${SEARCH_TERM_LIMITS.ids} distinct id terms`)
  const keys = Array.from({ length: SEARCH_TERM_LIMITS.metadataKeys + 1 }, (_, i) => `metadata.k${i}:v`).join(' ')
  t.equal(refusal(keys), `at most ${SEARCH_TERM_LIMITS.metadataKeys} distinct metadata keys`)
})

t.test('fields that do not exist are still refused', async (t) => {
  t.match(refusal('nope:x'), /unknown search field 'nope'/)
  t.match(refusal('id.x:1'), /unknown search field 'id'/)
  t.match(refusal('metadata:x'), /unknown search field 'metadata'/)
  t.match(refusal('metadata."":x'), /unknown search field 'metadata'/)
  t.match(refusal('constructor:x'), /unknown search field/)
  t.match(refusal('container'), /expected field:value at position 0/)
})
