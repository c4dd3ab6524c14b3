import type { TestApp } from './app.js'

/** Creates an Application (with the admin key unless `key` is given) and returns its id and key; throws unless 201. */
export async function application(app: TestApp, body: Record<string, unknown>, key?: string): Promise<{ id: string; key: string }> {
  const res = await app.request('POST', '/applications', { key, body: { name: 'test app', ...body } })
  if (res.status !== 201) throw new Error(`creating an Application failed: ${res.status} ${res.text}`)
  return { id: res.body.id as string, key: res.body.key as string }
}

/** Creates an Application with the admin key and returns its key. */
export async function appKey(app: TestApp, body: Record<string, unknown>): Promise<string> {
  return (await application(app, body)).key
}

/** Creates a token with `key` and returns its id; throws unless 201. */
export async function createToken(app: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await app.request('POST', '/tokens', { key, body })
  if (res.status !== 201) throw new Error(`creating a token failed: ${res.status} ${res.text}`)
  return res.body.id as string
}

export const VISA = '4242424242424242'
export const card = (number = VISA) => ({ number, expiration_month: 12, expiration_year: 2030, cvc: '123' })
