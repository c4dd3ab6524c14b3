import { randomUUID } from 'node:crypto'
import { authorizeBinding, authorizeLifetime } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import { isUuid } from '../shapes/ids.js'
import { isForeignKeyViolation, type ApplicationRecord, type Store } from '../store/index.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import { createActorLookup, type ActorLookup } from './actor-cache.js'
import type { InvocationContext } from './bridges.js'
import type { ReactorInvocation, ReactorOutcome, ReactorSupervisor } from './supervisor.js'

export type { InvocationContext, ReactorOutcome }

/** Saved code as the runtime runs it: whose it is, under which id and version, with its configuration. */
export type HostedCode = Omit<ReactorInvocation, 'args' | 'context'>

/** The Reactor runtime as the code host uses it (the ReactorSupervisor). */
export type CodeRuntime = Pick<ReactorSupervisor, 'compile' | 'invoke' | 'retire'>

/** Runs saved code; what the transform plugins need of the host. */
export interface CodeRunner {
  /** `context` goes with the call to every bridge call it makes (the acting Application, the audit hook). */
  invoke(code: HostedCode, args: unknown, context: InvocationContext): Promise<ReactorOutcome>
  /** The principal the code acts as now (see CodeHost); a runner without it leaves the principal as it began. */
  actor?(tenantId: string, applicationId: string | null, boundBy?: string | null): Promise<Principal | undefined>
}

/** One piece of code about to be saved. */
export interface CodePiece {
  code: string
  /** The request field its errors are reported under (`code`, `request_transform.code`). */
  field: string
  /** Put before the compiler's message where the owner holds more than one piece of code. */
  label?: string
}

/** What of an owner's input (a Reactor, a pre-configured proxy) makes it run as an Application. */
export interface CodeDraft {
  pieces: readonly CodePiece[]
  /** The Application the code is to act as; none when absent or null. */
  application?: { id: string } | null | undefined
  /**
   * A key acts as that Application too (a `require_auth: false` proxy's). Like the code, it may
   * not outlive the caller's own key (see authorizeLifetime).
   */
  keyActsAsApplication?: boolean
}

/** The code of an owner, in a fixed order; null where it has none in that slot. */
export type CodeList = readonly (string | null)[]

/**
 * Code that runs as an Application: checked and compiled when saved, versioned, run with the
 * Application it acts as, retired when removed. A Reactor is one piece of code, a
 * pre-configured proxy up to two (its transforms); the host knows neither, only code.
 */
export interface CodeHost extends CodeRunner {
  /**
   * Everything saving the code would trip over, before anything is written: 422 for every field
   * at once (the owner's own `errors` too), 403 when the Application is wider than the caller,
   * 422 `reactor_compile` on a syntax error (so it is not a failure at each call).
   */
  check(caller: Principal, draft: CodeDraft, errors?: FieldErrors): Promise<void>
  /** Changing or removing code that acts as an Application needs that Application's grants within the caller's. */
  authorizeBound(caller: Principal, applicationId: string | null): Promise<void>
  /** The version to save: kept while the code is the same, new when it changes, so the runtime drops isolates of the old code. */
  version(code: CodeList, current?: { code: CodeList; version: string }): string
  /**
   * The principal the code acts as: the Application, within the current grants of the
   * Application that bound it (`boundBy`, see binderOf). Undefined when it is bound to none, or
   * the Application or its binder is gone. Without `boundBy` (null: a row saved before binders
   * were kept, with no known saver), the Application's own grants alone.
   */
  actor(tenantId: string, applicationId: string | null, boundBy?: string | null): Promise<Principal | undefined>
  /**
   * The Application that saved the code (`bound_by`) as it is now, for `withinSaver`: null when
   * none was recorded (saved before savers were kept), undefined when it is gone.
   */
  saver(tenantId: string, boundBy: string | null): Promise<Principal | null | undefined>
  /** The code is gone: its warm isolates go too. */
  retire(id: string): void
  /** Starts listening for changes to the Applications code acts as (with a bus). */
  start(): Promise<void>
}

/**
 * Who saved the code (or the proxy's destination), stored with it (`bound_by`) whenever it is
 * saved. The code then acts as its Application only within this caller's current grants, as a
 * session acts within its authorizer's: `check` judged the binding against the caller's grants
 * as they were; the Application may be widened later, by someone else, and a narrow key must not
 * gain that widening through code it bound (nor keep what it loses itself). And callers' data
 * sent to the code or the destination goes only as far as the saver's grants reach (withinSaver).
 */
export function binderOf(caller: Principal): string {
  return caller.id
}

/**
 * Stores code bound to the Application `check` found. Deleted since (the row's foreign key
 * refuses it), the Application is as unknown as if `check` had not found it: 400, not a 500.
 */
export async function saveBound<T>(write: Promise<T>): Promise<T> {
  try {
    return await write
  } catch (err) {
    if (isForeignKeyViolation(err)) throw ValidationError.field('application.id', 'no Application with this id')
    throw err
  }
}

/** `bus` keeps the acting Applications cached (invalidated with their keys); without it each lookup reads the store. */
export function createCodeHost(deps: { store: Store; runtime: CodeRuntime; codeMaxChars: number; bus?: InvalidationBus }): CodeHost {
  const { store, runtime, codeMaxChars } = deps
  const actors = createActorLookup(store, deps.bus)

  async function application(tenantId: string, id: string): Promise<ApplicationRecord | undefined> {
    return isUuid(id) ? store.applications.findById(tenantId, id) : undefined
  }

  async function compile(piece: CodePiece): Promise<void> {
    try {
      await runtime.compile(piece.code)
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'reactor_compile') throw err
      const detail = err.detail ?? err.title
      throw new AppError('reactor_compile', { detail: piece.label ? `${piece.label}: ${detail}` : detail, errors: { [piece.field]: [detail] }, cause: err })
    }
  }

  return {
    async check(caller, draft, errors = {}) {
      for (const piece of draft.pieces) {
        if (piece.code.length > codeMaxChars) (errors[piece.field] ??= []).push(`must be at most ${codeMaxChars} characters`)
      }
      const app = draft.application ? await application(caller.tenantId, draft.application.id) : undefined
      if (draft.application && !app) (errors['application.id'] ??= []).push('no Application with this id')
      if (Object.keys(errors).length) throw new ValidationError(errors)
      // Whoever writes the code wields its Application, and hands it on to whoever may call the
      // code or holds the proxy key: not past the caller's own expiry (a Reactor left by an
      // expired key revealed a /pci/ card to a /general/-only caller).
      if (app) authorizeBinding(caller, app)
      if (app && (draft.keyActsAsApplication || draft.pieces.length > 0)) {
        authorizeLifetime(caller, app.expires_at, { what: draft.keyActsAsApplication ? 'The proxy key' : 'Code acting as this Application', field: 'application.id' })
      }
      for (const piece of draft.pieces) await compile(piece)
    },

    async authorizeBound(caller, applicationId) {
      const app = applicationId ? await store.applications.findById(caller.tenantId, applicationId) : undefined
      authorizeBinding(caller, app, 'id')
    },

    version(code, current) {
      const same = current !== undefined && code.length === current.code.length && code.every((piece, i) => piece === current.code[i])
      return same ? current.version : randomUUID()
    },

    actor: (tenantId, applicationId, boundBy) => (applicationId ? boundActor(actors, tenantId, applicationId, boundBy) : Promise.resolve(undefined)),
    saver: (tenantId, boundBy) => (boundBy === null ? Promise.resolve(null) : actors.find(tenantId, boundBy)),

    // Not `{ ...code, args, context }`: a spread followed by more properties is slow on Node 20.
    async invoke(code, args, context) {
      const audit = failClosed(context, currentActor(actors, context.actor, context.boundBy))
      let outcome: ReactorOutcome
      try {
        outcome = await runtime.invoke({ tenantId: code.tenantId, reactorId: code.reactorId, version: code.version, code: code.code, configuration: code.configuration, args, context: audit.context })
      } catch (err) {
        await audit.settled()
        throw err
      }
      await audit.settled()
      return outcome
    },

    retire: (id) => runtime.retire(id),
    start: () => actors.start(),
  }
}

/**
 * The Application an invocation acts as, as it is at each bridge call: deleted, narrowed or with
 * a new key since the invocation began, the call acts with what it holds now (nothing once gone).
 * An id is never reused, so once gone it is not looked up again.
 */
function currentActor(actors: ActorLookup, actor: Principal | undefined, boundBy: string | null | undefined): InvocationContext['current'] {
  if (actor === undefined) return undefined
  let gone = false
  return async () => {
    if (gone) return undefined
    const now = await boundActor(actors, actor.tenantId, actor.id, boundBy)
    gone = now === undefined
    return now
  }
}

/**
 * The Application as it is now, within its binder's grants as they are now (both cached by id,
 * dropped when either changes): a binder that was deleted leaves the code nothing to act as, one
 * that was narrowed or expires narrows or ends it, as an authorizer does its sessions.
 */
async function boundActor(actors: ActorLookup, tenantId: string, applicationId: string, boundBy: string | null | undefined): Promise<Principal | undefined> {
  const app = await actors.find(tenantId, applicationId)
  if (app === undefined || !boundBy) return app
  const binder = await actors.find(tenantId, boundBy)
  if (binder === undefined) return undefined
  const expiresAt = binder.expiresAt !== null && (app.expiresAt === null || binder.expiresAt < app.expiresAt) ? binder.expiresAt : app.expiresAt
  return {
    kind: app.kind,
    id: app.id,
    tenantId: app.tenantId,
    type: app.type,
    permissions: app.permissions,
    rules: app.rules,
    expiresAt,
    keyHash: app.keyHash,
    within: [...(app.within ?? []), { permissions: binder.permissions, rules: binder.rules }],
  }
}

/**
 * The bridge audit hooks of one invocation, remembering a failed write. The code sees the
 * failure as the bridge call's error and may catch it, but the invocation still ends in that
 * error (503): tokens it stored, a read or a fetch it was refused must not end in an answer
 * with no entry behind it. Once one write failed, later bridge calls that need one fail too.
 */
function failClosed(context: InvocationContext, current: InvocationContext['current']): { context: InvocationContext; settled(): Promise<void> } {
  let failure: { err: unknown } | undefined
  // Tokenize calls still running when the code answered (it need not await them): their insert
  // and entry end before the invocation does, and a failed entry fails it as one awaited would.
  const changes: Promise<unknown>[] = []
  const changing = (call: Promise<unknown>): void => void changes.push(call.catch(() => undefined))
  // `recordsChange`: the hook reports tokens already stored, so it still tries to write their
  // entry (and mark the request changed) after another call's failure, then fails with it.
  function guard<A extends unknown[]>(hook: ((...args: A) => Promise<void>) | undefined, recordsChange = false): ((...args: A) => Promise<void>) | undefined {
    if (hook === undefined) return undefined
    return async (...args) => {
      if (failure && !recordsChange) throw failure.err
      try {
        await hook(...args)
      } catch (err) {
        failure ??= { err }
        throw err
      }
      if (failure) throw failure.err
    }
  }
  return {
    context: { actor: context.actor, current, tokenRead: guard(context.tokenRead), tokensCreated: guard(context.tokensCreated, true), denied: context.denied, fetching: guard(context.fetching), changing, auditFailure: () => failure?.err },
    // No bridge call of an invocation starts once it ended (the runtime refuses them), so none is missed.
    async settled() {
      if (changes.length > 0) await Promise.all(changes)
      if (failure) throw failure.err
    },
  }
}
