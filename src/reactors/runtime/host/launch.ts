import { fileURLToPath } from 'node:url'

/** How to fork the runtime child; imported by the API process, so no isolated-vm here. */
export interface LaunchSpec {
  modulePath: string
  execArgv: string[]
}

/**
 * From TypeScript source (tests, `tsx`) this file itself is `.ts`, so the child is `child.ts`
 * and needs a TypeScript loader of its own: tsx, resolved to an absolute URL so the child does
 * not depend on its working directory. Compiled by `tsc` (dist/src/...), it is plain node.
 * `--no-node-snapshot` is required by isolated-vm on Node >= 20 and must be given to the
 * process itself: the worker threads inherit it (their own execArgv may not carry it).
 *
 * `--no-harmony-rab-gsab`: resizable ArrayBuffers grow outside the isolate's heap limit, like
 * WebAssembly memory (the prelude deletes that): one call held 3 GB under a 64 MB limit. The flag
 * takes `resize` and `maxByteLength` away from every isolate of the process.
 *
 * `--no-lazy-feedback-allocation`: every call instantiates the Reactor's module afresh, so every
 * function the Reactor defines is a new closure that runs only a few times. V8 otherwise
 * starts such closures without feedback vectors and allocates them after a budget of calls;
 * allocating them up front measured about 13% less runtime CPU per warm call (about 690 instead
 * of 790 µs, echo Reactor, back to back, runtime pinned to one core of the bench machine).
 */
export function runtimeLaunchSpec(): LaunchSpec {
  const fromSource = import.meta.url.endsWith('.ts')
  const modulePath = fileURLToPath(new URL(fromSource ? '../child/child.ts' : '../child/child.js', import.meta.url))
  const execArgv = ['--no-node-snapshot', '--no-lazy-feedback-allocation', '--no-harmony-rab-gsab']
  if (fromSource) execArgv.push(`--import=${import.meta.resolve('tsx')}`)
  if (process.sourceMapsEnabled) execArgv.push('--enable-source-maps')
  return { modulePath, execArgv }
}
