import { KEY_BYTES } from './aes-gcm.js'
import { Keyring, KEY_ID_PATTERN, type MasterKeyInput } from './keyring.js'

/** The id a single bare key gets, so its rows can name it once more keys are added. */
export const DEFAULT_KEY_ID = 'k1'

/** A bad master key setting. `problems` lists each one; none of them quotes key material. */
export class KeyringError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid master key setting: ${problems.join('; ')}`)
    this.name = 'KeyringError'
  }
}

/**
 * Parses `id1:<base64>,id2:<base64>` (first encrypts, all decrypt) or one bare base64 key
 * (id `k1`). Every problem is reported at once. Ids are echoed only once they pass the id
 * pattern, because a malformed entry may be a key pasted into the wrong place.
 */
export function parseKeyring(raw: string): Keyring {
  const entries = raw.trim().split(',')
  const problems: string[] = []
  const keys: MasterKeyInput[] = []
  const seen = new Set<string>()
  entries.forEach((entry, i) => {
    const label = `entry ${i + 1}`
    const parsed = parseEntry(entry.trim(), label, entries.length === 1, problems)
    if (parsed === null) return
    if (seen.has(parsed.id)) problems.push(`${label}: key id ${parsed.id} is used more than once`)
    seen.add(parsed.id)
    keys.push(parsed)
  })
  if (problems.length > 0) throw new KeyringError(problems)
  return new Keyring(keys)
}

function parseEntry(entry: string, label: string, alone: boolean, problems: string[]): MasterKeyInput | null {
  if (entry === '') {
    problems.push(`${label} is empty`)
    return null
  }
  const colon = entry.indexOf(':')
  if (colon === -1 && !alone) {
    problems.push(`${label} has no id; write <id>:<base64 key> when listing several keys`)
    return null
  }
  const id = colon === -1 ? DEFAULT_KEY_ID : entry.slice(0, colon).trim()
  const encoded = colon === -1 ? entry : entry.slice(colon + 1).trim()
  const name = KEY_ID_PATTERN.test(id) ? `${label} (${id})` : label
  if (!KEY_ID_PATTERN.test(id)) problems.push(`${label}: the key id must be 1-64 characters of [A-Za-z0-9_.-]`)
  const key = decodeKey(encoded, name, problems)
  return key === null || !KEY_ID_PATTERN.test(id) ? null : { id, key }
}

function decodeKey(encoded: string, name: string, problems: string[]): Buffer | null {
  const key = Buffer.from(encoded, 'base64')
  // Node's decoder skips characters it does not know; re-encoding exposes any that were skipped,
  // missing padding, or stray bits, so only canonical base64 passes.
  if (encoded === '' || key.toString('base64') !== encoded) {
    problems.push(`${name}: the key is not valid base64 (standard alphabet, with = padding)`)
    return null
  }
  if (key.length !== KEY_BYTES) {
    problems.push(`${name}: the key decodes to ${key.length} bytes; a master key must be ${KEY_BYTES} bytes`)
    return null
  }
  return key
}
