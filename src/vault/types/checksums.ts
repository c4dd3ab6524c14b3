/** Whether `s` is only ASCII digits, between `min` and `max` of them. */
export function isDigits(s: string, min: number, max: number): boolean {
  if (s.length < min || s.length > max) return false
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 48 || c > 57) return false
  }
  return true
}

/** Luhn mod-10 over a digit string (card numbers). */
export function passesLuhn(digits: string): boolean {
  let sum = 0
  let double = false
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
    double = !double
  }
  return digits.length > 0 && sum % 10 === 0
}

const ABA_WEIGHTS = [3, 7, 1, 3, 7, 1, 3, 7, 1]

/** The ABA routing number checksum: 3-7-1 weighted sum of nine digits is a multiple of 10. */
export function passesAbaChecksum(digits: string): boolean {
  if (!isDigits(digits, 9, 9)) return false
  let sum = 0
  for (let i = 0; i < 9; i++) sum += (digits.charCodeAt(i) - 48) * (ABA_WEIGHTS[i] as number)
  return sum % 10 === 0
}
