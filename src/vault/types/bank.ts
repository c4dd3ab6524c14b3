import type { FieldErrorList } from '../../errors/index.js'
import { isDigits, passesAbaChecksum } from './checksums.js'
import { identity, requireString, validateObject, validateValue, type TokenType } from './token-type.js'

function checkRoutingNumber(value: unknown, field: string, errors: FieldErrorList): void {
  const routing = requireString(value, field, errors)
  if (routing === null) return
  if (!isDigits(routing, 9, 9)) errors.add(field, 'must be 9 digits')
  else if (!passesAbaChecksum(routing)) errors.add(field, 'must pass the ABA routing number checksum')
}

const validateBank = validateObject(['routing_number', 'account_number'], (data, errors) => {
  checkRoutingNumber(data.routing_number, 'data.routing_number', errors)
  const account = requireString(data.account_number, 'data.account_number', errors)
  if (account !== null && !isDigits(account, 1, 17)) errors.add('data.account_number', 'must be 1 to 17 digits')
})

export const bank: TokenType = {
  name: 'bank',
  defaultContainer: '/bank/high/',
  validate: validateBank,
  defaultMask: {
    routing_number: '{{ data.routing_number }}',
    account_number: '{{ data.account_number | reveal_last: 4 }}',
  },
  maskLimits: { routing_number: 'all', account_number: { first: 0, last: 4 } },
  // The same account number at another bank is another account.
  defaultFingerprintExpression: '{{ data.routing_number }}:{{ data.account_number }}',
  canonicalize: identity,
}

export const usBankRoutingNumber: TokenType = {
  name: 'us_bank_routing_number',
  defaultContainer: '/bank/low/',
  validate: validateValue(checkRoutingNumber),
  // Routing numbers identify banks, not people, and are printed on every cheque.
  defaultMask: '{{ data }}',
  maskLimits: { '': 'all' },
  defaultFingerprintExpression: '{{ data }}',
  canonicalize: identity,
}
