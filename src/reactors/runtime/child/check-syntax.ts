import ivm from 'isolated-vm'
import { dispose } from './isolate-cache.js'
import { describeCompileError } from './compile-error.js'
import { MODULE_FILENAME, MODULE_LINE_OFFSET, wrapModule } from './sandbox-source.js'

/**
 * Compiles (never runs) Reactor code in a throwaway isolate. Returns the compiler's message with
 * the position in the user's own line numbers, or undefined when the code compiles.
 */
export async function checkSyntax(code: string, memoryMb: number): Promise<string | undefined> {
  const isolate = new ivm.Isolate({ memoryLimit: memoryMb })
  try {
    await isolate.compileScript(wrapModule(code), { filename: MODULE_FILENAME, lineOffset: MODULE_LINE_OFFSET })
    return undefined
  } catch (err) {
    return describeCompileError(err, code)
  } finally {
    dispose(isolate)
  }
}
