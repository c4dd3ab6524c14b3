/**
 * The time every expiry decision reads: API keys and sessions (authenticator), an Application
 * acting for a Reactor, tokens (their queries and their cache), the expiry sweep. It is handed in
 * (`openServices`), never read from a global, so tests move it instead of sleeping until a
 * deadline passes. Milliseconds since the epoch, like `Date.now`.
 */
export type Clock = () => number

export const systemClock: Clock = () => Date.now()
