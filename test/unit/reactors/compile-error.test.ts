import t from 'tap'
import { describeCompileError } from '../../../src/reactors/runtime/child/compile-error.js'

t.test('the compiler position is spelled out in the user\'s own lines', async (t) => {
  const err = new SyntaxError("Unexpected token ';' [reactor.js:2:11]")
  t.equal(describeCompileError(err), "SyntaxError: Unexpected token ';' (line 2, column 11)")
})

t.test('a message without a position is kept as it is', async (t) => {
  t.equal(describeCompileError(new SyntaxError('Unexpected end of input')), 'SyntaxError: Unexpected end of input')
  t.equal(describeCompileError('weird'), 'SyntaxError: weird')
})

t.test('an error on the wrapper\'s closing line means the code ended too early', async (t) => {
  const err = new SyntaxError("Unexpected token '}' [reactor.js:2:1]")
  t.equal(describeCompileError(err, 'module.exports = ('), "SyntaxError: Unexpected token '}' (at the end of the code)")
  t.equal(describeCompileError(err, 'a\nb'), "SyntaxError: Unexpected token '}' (line 2, column 1)")
})
