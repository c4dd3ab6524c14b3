/** Setup calls against a running Tessera (Applications, tokens), outside any timed section. */

export async function call(url: string, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any -- arbitrary JSON
  const res = await fetch(url + path, {
    method,
    headers: { 'SVC-API-KEY': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined }
}

async function expect(url: string, key: string, method: string, path: string, body: unknown, status: number) {
  const res = await call(url, key, method, path, body)
  if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

export interface BenchApplication {
  id: string
  key: string
}

/**
 * A private Application that creates tokens, reads them revealed (so read and detokenize do the
 * full decrypt) and uses them in the proxy.
 */
export async function createPrivateApp(url: string, adminKey: string): Promise<BenchApplication> {
  const body = await expect(url, adminKey, 'POST', '/applications', {
    name: 'bench',
    type: 'private',
    permissions: ['token:create', 'token:read', 'token:use'],
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read', 'token:use'] }],
  }, 201)
  return { id: body.id, key: body.key }
}

export async function createCardTokens(url: string, key: string, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) ids.push((await expect(url, key, 'POST', '/tokens', { type: 'card_number', data: '4242424242424242' }, 201)).id)
  return ids
}

export async function createToken(url: string, key: string, data: unknown): Promise<string> {
  return (await expect(url, key, 'POST', '/tokens', { type: 'token', data }, 201)).id
}
