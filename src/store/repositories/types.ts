/** An access rule as stored (the API shape, see API.md "Access rules"). */
export interface AccessRuleRecord {
  description?: string
  priority: number
  container?: string
  conditions?: { attribute: 'id' | 'container'; operator: 'starts_with' | 'equals'; value: string }[]
  transform: 'redact' | 'mask' | 'reveal'
  permissions: string[]
}
