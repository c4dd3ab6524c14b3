import { isDigits } from './checksums.js'
import { requireString, validateValue, type TokenType } from './token-type.js'

/**
 * Nine digits, with dashes allowed only where the printed form has them (`123-45-6789` for an
 * SSN, `12-3456789` for an EIN). `dashesAfter` lists the digit counts a dash may follow.
 */
function isNineDigits(value: string, dashesAfter: readonly number[]): boolean {
  const digits = stripDashes(value)
  if (!isDigits(digits, 9, 9)) return false
  let seen = 0
  for (let i = 0; i < value.length; i++) {
    if (value[i] !== '-') seen++
    else if (!dashesAfter.includes(seen) || value[i - 1] === '-') return false
  }
  return true
}

function stripDashes(value: string): string {
  return value.replaceAll('-', '')
}

function identifierType(name: 'social_security_number' | 'employer_id_number', dashesAfter: readonly number[], example: string): TokenType {
  return {
    name,
    defaultContainer: '/pii/high/',
    validate: validateValue((data, field, errors) => {
      const value = requireString(data, field, errors)
      if (value !== null && !isNineDigits(value, dashesAfter)) errors.add(field, `must be 9 digits, optionally written ${example}`)
    }),
    defaultMask: '{{ data | reveal_last: 4 }}',
    maskLimits: { '': { first: 0, last: 4 } },
    defaultFingerprintExpression: '{{ data }}',
    canonicalize: (data) => stripDashes(data as string),
  }
}

export const socialSecurityNumber = identifierType('social_security_number', [3, 5], 'as 123-45-6789')
export const employerIdNumber = identifierType('employer_id_number', [2], 'as 12-3456789')
