/**
 * Card brand and last 4 digits, from a card token's data passed in the arguments:
 *
 * POST /reactors/{id}/react  {"args": {"card": "{{ <card token id> }}"}}
 *
 * The expression is detokenized under the caller's access rules before the Reactor runs, so
 * `args.card` is the token's data ({number, expiration_month, ...}) or a bare card number.
 * Only the brand and the last 4 digits leave the Reactor.
 */
const BRANDS = [
  ['amex', /^3[47]/],
  ['diners', /^3(0[0-5]|[689])/],
  ['jcb', /^35(2[89]|[3-8])/],
  ['visa', /^4/],
  ['mastercard', /^(5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720)/],
  ['discover', /^(6011|65|64[4-9])/],
  ['unionpay', /^62/],
]

module.exports = async function (req) {
  const card = req.args && req.args.card
  const number = typeof card === 'string' ? card : card && card.number
  if (typeof number !== 'string' || !/^\d{12,19}$/.test(number)) {
    throw new BadRequestError('args.card must be a card token\'s data or a card number')
  }
  const match = BRANDS.find(([, pattern]) => pattern.test(number))
  return { raw: { brand: match ? match[0] : 'unknown', last4: number.slice(-4) } }
}
