export type CardBrand = 'visa' | 'mastercard' | 'american-express' | 'discover' | 'diners-club' | 'jcb' | 'unionpay' | 'maestro'

// [brand, lowest prefix, highest prefix], compared on the number's first digits. Ordered so
// that narrower ranges come before the wider ones that contain them (Discover's 622126-622925
// before UnionPay's 62, Maestro's 5018 before nothing of Mastercard's 51-55).
const RANGES: readonly [CardBrand, string, string][] = [
  ['american-express', '34', '34'],
  ['american-express', '37', '37'],
  ['diners-club', '300', '305'],
  ['diners-club', '36', '36'],
  ['diners-club', '38', '39'],
  ['jcb', '3528', '3589'],
  ['visa', '4', '4'],
  ['mastercard', '51', '55'],
  ['mastercard', '2221', '2720'],
  ['maestro', '5018', '5018'],
  ['maestro', '5020', '5020'],
  ['maestro', '5038', '5038'],
  ['maestro', '5893', '5893'],
  ['maestro', '6304', '6304'],
  ['maestro', '6759', '6759'],
  ['maestro', '6761', '6763'],
  ['discover', '6011', '6011'],
  ['discover', '622126', '622925'],
  ['discover', '644', '649'],
  ['discover', '65', '65'],
  ['unionpay', '62', '62'],
]

/** The card network a number belongs to, by its leading digits; null when none is known. */
export function detectCardBrand(number: string): CardBrand | null {
  for (const [brand, low, high] of RANGES) {
    if (number.length < low.length) continue
    const prefix = Number(number.slice(0, low.length))
    if (prefix >= Number(low) && prefix <= Number(high)) return brand
  }
  return null
}
