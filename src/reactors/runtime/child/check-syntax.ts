import ivm from 'isolated-vm'
import { dispose } from './isolate-cache.js'
import { describeCompileError } from './compile-error.js'
import { wrapperEscape } from './module-body.js'
import { MODULE_FILENAME, MODULE_LINE_OFFSET, wrapModule } from './sandbox-source.js'

/**
 * Compiles (never runs) Reactor code in a throwaway isolate. Returns the compiler's message with
 * the position in the user's own line numbers, or undefined when the code compiles and stays in
 * its wrapper (see wrapperEscape).
 */
export async function checkSyntax(code: string, memoryMb: number): Promise<string | undefined> {
  const isolate = new ivm.Isolate({ memoryLimit: memoryMb })
  try {
    await isolate.compileScript(wrapModule(code), { filename: MODULE_FILENAME, lineOffset: MODULE_LINE_OFFSET })
  } catch (err) {
    dispose(isolate)
    return describeCompileError(err, code)
  }
  try {
    const escape = await wrapperEscape(isolate, code)
    return escape === undefined ? undefined : `SyntaxError: ${escape}`
  } finally {
    dispose(isolate)
  }
}
