/**
 * Tokenizes what an API returns: asks a card issuer for a new virtual card and hands back
 * tokens instead of the card. Returning `{ tokenize: X }` makes the service tokenize X as
 * POST /tokenize would, acting as the Reactor's Application; the tokens come back in `tokens`.
 *
 * configuration: {"ISSUER_API_URL": "https://issuer.example"}
 * POST /reactors/{id}/react  {"args": {"holder": "Ada Lovelace"}}
 */
module.exports = async function (req) {
  const { args, configuration } = req
  const res = await fetch(configuration.ISSUER_API_URL + '/cards', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ holder: args.holder }),
  })
  if (!res.ok) throw new CustomHttpResponseError({ status: 502, body: { error: 'issuer_failed', destination_status: res.status } })
  const card = await res.json()
  return {
    raw: { issued: true, holder: args.holder },
    tokenize: {
      card: {
        type: 'card',
        data: { number: card.number, expiration_month: card.exp_month, expiration_year: card.exp_year, cvc: card.cvc },
      },
    },
  }
}
