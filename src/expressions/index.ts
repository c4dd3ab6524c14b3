export { ExpressionError } from './expression-error.js'
export { isValidTokenId, tokenIdProblem, TOKEN_ID_MIN_LENGTH, TOKEN_ID_MAX_LENGTH } from './token-id.js'
export { parseTemplate, type Expression, type Template, type TemplatePart } from './parse-template.js'
export { FILTER_NAMES, MASK_CHAR, toText, type FilterCall, type FilterName } from './filters.js'
export { type PathSegment } from './json-path.js'
export {
  compileValue,
  DEFAULT_MAX_TOKENS,
  evaluateExpression,
  findTokenIds,
  MAX_DEPTH,
  renderTemplate,
  renderText,
  renderValue,
  RenderBudget,
  type CompiledValue,
  type CompileOptions,
  type TokenLookup,
} from './render.js'
