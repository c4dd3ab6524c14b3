/** ISO 8601 UTC, or undefined so optional fields are omitted rather than null. */
export const iso = (d: Date | string | null | undefined): string | undefined =>
  d === null || d === undefined ? undefined : new Date(d).toISOString()

export interface Pagination {
  total_items: number
  page_number: number
  page_size: number
  total_pages: number
}

export function presentPage<T, R>(items: T[], total: number, page: number, size: number, present: (item: T) => R) {
  const pagination: Pagination = { total_items: total, page_number: page, page_size: size, total_pages: Math.ceil(total / size) }
  return { pagination, data: items.map(present) }
}

/** Drops undefined fields so JSON output is stable and compact. */
export function compact<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T
}

/** A `/v2` keyset page: `next` (absent on the last page) goes back as `start`. */
export function presentCursorPage<T, R>(items: T[], size: number, next: string | undefined, present: (item: T) => R) {
  return { pagination: compact({ page_size: size, next }), data: items.map(present) }
}
