import type ivm from 'isolated-vm'
import { compilerMessage } from './compile-error.js'

/**
 * Whether Reactor code stays inside the CommonJS wrapper (see wrapModule): it must be a function
 * body on its own. Code such as `}); let stash = []; (function () {` compiles wrapped, but closes
 * the wrapper early and puts statements at the script's top level, where a `let` is a binding of
 * the isolate's one context that lockdown does not freeze and every later call shares (one
 * caller's data reached the next). Such code is refused, at save (422) and at a cold start.
 *
 * Returns the compiler's reason when the code escapes, undefined when it is contained.
 */
export async function wrapperEscape(isolate: ivm.Isolate, code: string, context?: ivm.Context): Promise<string | undefined> {
  // A valid script on its own has balanced braces in the very same token stream, so it cannot
  // close the wrapper: the usual case, decided without a context.
  if (await compilesAlone(isolate, code)) return undefined
  // Code that only compiles wrapped (a top-level `return`, `new.target`): V8's Function
  // constructor parses the body as a body, and refuses one that closes its function early
  // ("Single function literal required"). It only compiles; nothing of the code runs.
  const own = context ?? (await isolate.createContext())
  try {
    await own.evalClosure('Function("module", "exports", $0)', [code])
    return undefined
  } catch (err) {
    // The compiler's own words, cut like any compiler message (they may quote the code).
    return `The code closes the module function it runs in (${compilerMessage(err)})`
  } finally {
    if (context === undefined) own.release()
  }
}

async function compilesAlone(isolate: ivm.Isolate, code: string): Promise<boolean> {
  try {
    const script = await isolate.compileScript(code)
    script.release()
    return true
  } catch {
    return false
  }
}
