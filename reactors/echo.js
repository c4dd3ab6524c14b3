/**
 * Echo: returns its arguments as `raw`. The smallest Reactor, used by docs, tests and the bench.
 *
 * POST /reactors/{id}/react  {"args": {"hello": "world"}}  ->  {"raw": {"hello": "world"}, ...}
 */
module.exports = async function (req) {
  const { args } = req
  return { raw: args }
}
