import t from 'tap'
import { headerValueText, isAnswerStatus, isHeaderName, isHeaderValue, isRecord } from '../../../src/shapes/http-parts.js'

t.test('header names are RFC 9110 tokens', async (t) => {
  for (const name of ['x-a', 'Content-Type', "!#$%&'*+.^_`|~09"]) t.ok(isHeaderName(name), name)
  for (const name of ['', 'a b', 'a:b', 'é', 'a\r\nb']) t.notOk(isHeaderName(name), JSON.stringify(name))
})

t.test('header values refuse control characters but horizontal tab, and what Node cannot write', async (t) => {
  for (const value of ['', 'a b', 'a\tb', 'é', '\xff']) t.ok(isHeaderValue(value), JSON.stringify(value))
  for (const value of ['a\r\nb', 'a\nb', '\x00', '\x7f', '€', '\u0100']) t.notOk(isHeaderValue(value), JSON.stringify(value))
  t.equal(headerValueText('v'), 'v')
  t.equal(headerValueText(12), '12')
  for (const value of [null, undefined, true, {}, ['a']]) t.equal(headerValueText(value), undefined)
})

t.test('a value that passes can be written by node:http', async (t) => {
  const { OutgoingMessage } = await import('node:http')
  for (const value of ['é', '\xff', 'a\tb', '€', '\u0100', 'a\rb']) {
    const writable = (() => {
      try {
        new OutgoingMessage().setHeader('x-a', value)
        return true
      } catch {
        return false
      }
    })()
    t.equal(isHeaderValue(value), writable, JSON.stringify(value))
  }
})

t.test('an answer status is an integer from 200 to 599', async (t) => {
  for (const status of [200, 404, 599]) t.ok(isAnswerStatus(status), String(status))
  for (const status of [199, 600, 200.5, '200', Number.NaN, null]) t.notOk(isAnswerStatus(status), String(status))
})

t.test('a record is a plain object', async (t) => {
  t.ok(isRecord({}))
  for (const value of [null, [], 'a', 1]) t.notOk(isRecord(value), JSON.stringify(value))
})
