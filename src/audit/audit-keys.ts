import { createSecretKey, hkdfSync, type KeyObject } from 'node:crypto'
import { inspect } from 'node:util'

/** The keys one audit secret yields; `id` names it in every row and checkpoint it sealed. */
export interface AuditKey {
  readonly id: string
  readonly chain: KeyObject
  readonly checkpoint: KeyObject
}

/**
 * Keys for the audit hash chain and checkpoints, derived with HKDF-SHA-256 (separate labels, so
 * a chain hash can never pass for a checkpoint signature). The secrets are `SVC_AUDIT_SECRET`
 * (comma-separated; the first seals new entries) followed by `SVC_KEY_HASH_SECRET`, which is
 * the default when `SVC_AUDIT_SECRET` is unset: nothing new to generate, back up or lose, and
 * an installation that later sets `SVC_AUDIT_SECRET` still verifies what it wrote before.
 */
export class AuditKeyring {
  readonly primary: AuditKey
  readonly #byId: Map<string, AuditKey>

  constructor(secrets: readonly string[]) {
    const keys = secrets.map(deriveAuditKey)
    if (!keys[0]) throw new Error('the audit keyring needs at least one secret')
    this.primary = keys[0]
    this.#byId = new Map(keys.map((k) => [k.id, k]))
  }

  byId(id: string): AuditKey | undefined {
    return this.#byId.get(id)
  }

  [inspect.custom](): string {
    return `AuditKeyring { primary: ${this.primary.id} }`
  }

  toJSON(): Record<string, never> {
    return {}
  }
}

/** `keyHashSecret` may be missing only where SVC_AUDIT_SECRET names a secret (an auditor's verify). */
export function auditKeyring(auditSecret: string | undefined, keyHashSecret: string | undefined): AuditKeyring {
  const explicit = (auditSecret ?? '').split(',').map((s) => s.trim()).filter(Boolean)
  return new AuditKeyring(keyHashSecret === undefined ? explicit : [...explicit, keyHashSecret])
}

function deriveAuditKey(secret: string): AuditKey {
  const ikm = Buffer.from(secret, 'utf8')
  const derive = (label: string, bytes = 32) => Buffer.from(hkdfSync('sha256', ikm, Buffer.alloc(0), `tessera/audit/${label}/v1`, bytes))
  // KeyObjects, made once: createHmac with a Buffer key wraps it in a new one for every entry.
  return { id: derive('key-id', 8).toString('hex'), chain: createSecretKey(derive('chain')), checkpoint: createSecretKey(derive('checkpoint')) }
}
