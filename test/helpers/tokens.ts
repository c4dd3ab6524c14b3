import type { TestApp } from './app.js'

/** Creates an Application with the admin key and returns its key. */
export async function appKey(app: TestApp, body: Record<string, unknown>): Promise<string> {
  const res = await app.request('POST', '/applications', { body: { name: 'test app', ...body } })
  if (res.status !== 201) throw new Error(`creating an Application failed: ${res.status} ${res.text}`)
  return res.body.key as string
}

export const VISA = '4242424242424242'
export const card = (number = VISA) => ({ number, expiration_month: 12, expiration_year: 2030, cvc: '123' })
