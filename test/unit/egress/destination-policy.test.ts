import t from 'tap'
import { buildDestination } from '../../../src/egress/destination-url.js'
import { DestinationRefusedError, isPublicAddress, policyLookup } from '../../../src/egress/destination-policy.js'
import { openForwarder, rawDestination, readAll, startStub } from '../../helpers/stub-server.js'

t.test('only public unicast addresses are public', async (t) => {
  const publicAddresses = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700::1111', '2a00:1450:4001::200e',
    '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1']
  for (const ip of publicAddresses) t.ok(isPublicAddress(ip), `${ip} is public`)
  const refused = [
    '127.0.0.1', '127.255.255.254', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.0.1', '169.254.169.254',
    '169.254.0.1', '100.64.0.1', '100.127.255.255', '0.0.0.0', '0.1.2.3', '224.0.0.1', '239.255.255.250',
    '255.255.255.255', '240.0.0.1', '192.0.2.1', '198.18.0.1', '192.0.0.8',
    '::', '::1', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'fe80::1%eth0', 'ff02::1', 'fec0::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::127.0.0.1', '::7f00:1',
    '::ffff:0:127.0.0.1', '64:ff9b::127.0.0.1', '64:ff9b::a00:1', '64:ff9b:1::a00:1', '2002:7f00:1::1', '2002:a00:1::',
    '2001::1', '2001:db8::1', '100::1',
    // RFC 8215's local-use NAT64 prefix is never globally routable, whatever it embeds (127.0.0.1
    // and 8.8.8.8 in the /48 layout, bits 48-63 and 72-87, then 8.8.8.8 in the last 4 bytes)
    '64:ff9b:1:7f00:0:100:808:808', '64:ff9b:1:808:8:800:808:808', '64:ff9b:1::808:808',
    // spellings that are not canonical IP literals are never "public" either
    '127.1', '2130706433', '0x7f000001', 'not-an-ip', '',
  ]
  for (const ip of refused) t.notOk(isPublicAddress(ip), `${ip} is refused`)
})

t.test('policyLookup refuses a name that resolves to a private address', async (t) => {
  for (const all of [false, true]) {
    const err = await new Promise<unknown>((resolve) => policyLookup('localhost', { all }, (e) => resolve(e)))
    t.ok(err instanceof DestinationRefusedError, `all: ${all}`)
    t.equal((err as Error).message, 'The host localhost cannot be used as a destination.')
    t.notMatch((err as Error).message, /127\.0\.0\.1/, 'the message does not say how the name resolved')
  }
})

t.test('a name that does not resolve and one that resolves privately get one answer', async (t) => {
  const forwarder = openForwarder(t, { allowPrivate: false, allowHttp: false })
  const answer = async (host: string, headers: Record<string, string>) => {
    const err = await forwarder.forward({ method: 'GET', destination: rawDestination(`https://${host}/`), headers }).then(() => undefined, (e: unknown) => e)
    const { code, status, detail } = err as { code?: string, status?: number, detail?: string }
    return { code, status, detail: detail?.replace(host, '<host>') }
  }
  for (const headers of [{}, { 'svc-proxy-connection': 'keep-alive' }] as Record<string, string>[]) {
    const via = Object.keys(headers).length ? 'node:http' : 'undici'
    const missing = await answer('no-such-host.invalid', headers)
    t.same(missing, await answer('localhost', headers), `${via}: the same code, status and detail`)
    t.match(missing, { code: 'destination_refused', status: 400 }, via)
    t.notMatch(missing.detail, /ENOTFOUND|EAI_|not public|no address/, `${via}: no errno, no reason`)
  }
})

t.test('no refused form ever reaches a listening destination', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t, { allowPrivate: false, allowHttp: true })
  const p = stub.port
  const forms = [
    `http://127.0.0.1:${p}/`, `http://127.1:${p}/`, `http://0x7f000001:${p}/`, `http://2130706433:${p}/`,
    `http://017700000001:${p}/`, `http://0x7f.1:${p}/`, `http://[::ffff:127.0.0.1]:${p}/`, `http://[::ffff:7f00:1]:${p}/`,
    `http://[::127.0.0.1]:${p}/`, `http://0.0.0.0:${p}/`, `http://0:${p}/`, `http://[::]:${p}/`, `http://[::1]:${p}/`,
    `http://localhost:${p}/`, `http://LOCALHOST:${p}/`, `http://127.0.0.1.:${p}/`,
  ]
  for (const href of forms) {
    // Straight to the connector: the check at connect time must hold on its own.
    for (const headers of [{}, { 'svc-proxy-connection': 'keep-alive' }]) {
      const via = Object.keys(headers).length ? 'node:http' : 'undici'
      await t.rejects(forwarder.forward({ method: 'GET', destination: rawDestination(href), headers }),
        { code: 'destination_refused', status: 400 }, `${href} via ${via}`)
    }
    // And through buildDestination, which fails fast on literals and leaves names to the connector.
    await t.rejects(async () => forwarder.forward({
      method: 'GET', destination: buildDestination(href, '/x', '', { allowHttp: true, allowPrivate: false }), headers: {},
    }), { code: 'destination_refused', status: 400 }, `${href} via buildDestination`)
  }
  t.equal(stub.connections(), 0, 'the stub saw no connection at all')
})

t.test('the same stub is reachable when allowPrivate relaxes the policy', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t, { allowPrivate: true })
  const res = await forwarder.forward({ method: 'GET', destination: rawDestination(`http://localhost:${stub.port}/ok`), headers: {} })
  t.equal(res.status, 200)
  await readAll(res.body)
  t.equal(stub.connections(), 1)
})

t.test('http is refused at forward time without allowHttp', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t, { allowHttp: false, allowPrivate: true })
  await t.rejects(forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: {} }),
    { code: 'destination_refused' })
  t.equal(stub.connections(), 0)
})
