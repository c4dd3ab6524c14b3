import { ExpressionError } from '../../expressions/index.js'
import { renderDataTemplate } from './data-template.js'

export type Transform = 'redact' | 'mask' | 'reveal'

export interface TransformableToken {
  data: unknown
  /** The token's mask as stored; null or absent means none. */
  mask?: unknown
}

/**
 * The `data` property a response carries under `transform`, or undefined when `data` must be
 * omitted. Token data is never undefined (types refuse it), so undefined is unambiguous.
 */
export function applyTransform(transform: Transform, token: TransformableToken): unknown {
  switch (transform) {
    case 'redact':
      return undefined
    case 'reveal':
      return token.data
    case 'mask':
      return renderMask(token)
  }
}

function renderMask(token: TransformableToken): unknown {
  if (token.mask === undefined || token.mask === null) return undefined
  try {
    return renderDataTemplate(token.mask, token.data)
  } catch (err) {
    // A mask that cannot render against this data (e.g. data updated into another shape) must
    // fail closed: omitting data is what `mask` does without a mask, and reveals nothing.
    if (err instanceof ExpressionError) return undefined
    throw err
  }
}
