import type { Clock } from '../../src/clock.js'

export interface TestClock extends Clock {
  /** Moves the clock forward: what expires within `ms` has expired. */
  advance(ms: number): void
}

/**
 * A clock that runs with real time and can be moved forward, handed to `startTestApp`: an expiry
 * test jumps past the deadline instead of sleeping until it.
 */
export function testClock(): TestClock {
  let offset = 0
  const clock = () => Date.now() + offset
  return Object.assign(clock, {
    advance(ms: number) {
      offset += ms
    },
  })
}
