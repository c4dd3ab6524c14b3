import { bank, usBankRoutingNumber } from './bank.js'
import { card, cardNumber } from './card.js'
import { employerIdNumber, socialSecurityNumber } from './identifiers.js'
import { identity, validateValue, type TokenType, type TokenTypeName } from './token-type.js'

const token: TokenType = {
  name: 'token',
  defaultContainer: '/general/high/',
  validate: validateValue((data, field, errors) => {
    if (data === undefined || data === null) errors.add(field, 'is required')
  }),
  // Arbitrary data has no shape a mask could assume.
  defaultMask: null,
  // Any JSON: no field is known to be safe to show, so at most the last four characters of any.
  maskLimits: { '*': { first: 0, last: 4 } },
  defaultFingerprintExpression: '{{ data }}',
  canonicalize: identity,
}

export const tokenTypes: Readonly<Record<TokenTypeName, TokenType>> = Object.freeze({
  token,
  card,
  card_number: cardNumber,
  bank,
  us_bank_routing_number: usBankRoutingNumber,
  social_security_number: socialSecurityNumber,
  employer_id_number: employerIdNumber,
})

export const TOKEN_TYPE_NAMES = Object.keys(tokenTypes) as TokenTypeName[]

export function isTokenTypeName(name: unknown): name is TokenTypeName {
  return typeof name === 'string' && Object.hasOwn(tokenTypes, name)
}

export function getTokenType(name: TokenTypeName): TokenType {
  return tokenTypes[name]
}

export type { TokenType, TokenTypeName } from './token-type.js'
export { applyTransform, type Transform, type TransformableToken } from './transforms.js'
export { allowedMask, maskProblems, testsBeyondMask, type Allowance, type MaskLimits } from './mask-limits.js'
export { canonicalJson, fingerprintInput, searchIndexValues } from './fingerprint-input.js'
export { compileDataTemplate, dataLookup, dataRenderBudget, renderDataTemplate, validateDataTemplate } from './data-template.js'
export { detectCardBrand, type CardBrand } from './card-brand.js'
export { isDigits, passesAbaChecksum, passesLuhn } from './checksums.js'
