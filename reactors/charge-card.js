/**
 * Calls a payment API with a revealed card. The caller passes the card as an expression,
 * detokenized before the Reactor runs; where to send it comes from the Reactor's configuration:
 *
 * configuration: {"PAYMENT_API_URL": "https://api.payments.example/charges", "PAYMENT_API_KEY": "..."}
 * POST /reactors/{id}/react  {"args": {"card": "{{ <card token id> }}", "amount": 1299, "currency": "EUR"}}
 *
 * `fetch` goes through the service (its destination policy applies); only the charge id and
 * status are returned, never the card.
 */
module.exports = async function (req) {
  const { args, configuration } = req
  const card = args && args.card
  if (!card || typeof card.number !== 'string') throw new BadRequestError('args.card must be a card token\'s data')
  if (!Number.isInteger(args.amount) || args.amount <= 0) throw new BadRequestError('args.amount must be a positive integer')

  const res = await fetch(configuration.PAYMENT_API_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + configuration.PAYMENT_API_KEY },
    body: JSON.stringify({
      amount: args.amount,
      currency: args.currency || 'EUR',
      card: { number: card.number, exp_month: card.expiration_month, exp_year: card.expiration_year, cvc: card.cvc },
    }),
  })
  if (res.status === 401 || res.status === 403) throw new AuthorizationError('The payment API refused the configured key')
  if (!res.ok) {
    throw new CustomHttpResponseError({ status: 502, headers: { 'content-type': 'application/json' }, body: { error: 'payment_failed', destination_status: res.status } })
  }
  const charge = await res.json()
  return { raw: { id: charge.id, status: charge.status } }
}
