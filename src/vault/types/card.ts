import type { FieldErrorList } from '../../errors/index.js'
import { isDigits, passesLuhn } from './checksums.js'
import { identity, requireString, validateObject, validateValue, type TokenType } from './token-type.js'

const PAN_LIMIT = { first: 6, last: 4 }

const CARD_FIELDS = ['number', 'expiration_month', 'expiration_year', 'cvc'] as const

function checkCardNumber(value: unknown, field: string, errors: FieldErrorList): void {
  const number = requireString(value, field, errors)
  if (number === null) return
  if (!isDigits(number, 13, 19)) errors.add(field, 'must be 13 to 19 digits')
  else if (!passesLuhn(number)) errors.add(field, 'must pass the Luhn check')
}

function checkInteger(value: unknown, field: string, min: number, max: number, message: string, errors: FieldErrorList): void {
  if (value === undefined || value === null) errors.add(field, 'is required')
  else if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) errors.add(field, message)
}

const validateCard = validateObject(CARD_FIELDS, (data, errors) => {
  checkCardNumber(data.number, 'data.number', errors)
  checkInteger(data.expiration_month, 'data.expiration_month', 1, 12, 'must be an integer from 1 to 12', errors)
  checkInteger(data.expiration_year, 'data.expiration_year', 1000, 9999, 'must be a 4-digit year', errors)
  if (data.cvc !== undefined) {
    if (typeof data.cvc !== 'string' || !isDigits(data.cvc, 3, 4)) errors.add('data.cvc', 'must be a string of 3 or 4 digits')
  }
})

export const card: TokenType = {
  name: 'card',
  defaultContainer: '/pci/high/',
  validate: validateCard,
  // The CVC is never part of the mask: PCI DSS treats it as sensitive authentication data.
  defaultMask: {
    number: '{{ data.number | reveal_last: 4 }}',
    expiration_month: '{{ data.expiration_month }}',
    expiration_year: '{{ data.expiration_year }}',
  },
  // PCI DSS 3.4.1: at most the BIN (first six) and the last four digits may be displayed.
  maskLimits: { number: PAN_LIMIT, expiration_month: 'all', expiration_year: 'all' },
  // The number alone identifies a card; expiry and CVC change on reissue.
  defaultFingerprintExpression: '{{ data.number }}',
  canonicalize: identity,
}

export const cardNumber: TokenType = {
  name: 'card_number',
  defaultContainer: '/pci/high/',
  validate: validateValue(checkCardNumber),
  defaultMask: '{{ data | reveal_last: 4 }}',
  maskLimits: { '': PAN_LIMIT },
  defaultFingerprintExpression: '{{ data }}',
  canonicalize: identity,
}
