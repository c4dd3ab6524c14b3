import { AuthorizeSessionBody, SessionAuthorized, SessionCreated } from '../schemas/sessions.js'
import {
  AnyJson,
  CreateTokenBody,
  ListTokensQuery,
  ListTokensV2Query,
  SearchTokensBody,
  SearchTokensV2Body,
  TokenCursorList,
  TokenList,
  TokenResponse,
  UpdatedTokenName,
  UpdateTokenBody,
} from '../schemas/tokens.js'
import { Type } from '@sinclair/typebox'
import { op } from './operation.js'

const id = { id: Type.String({ minLength: 1, maxLength: 400 }) }
const tag = 'Tokens'

export const tokenOperations = [
  op({ method: 'post', path: '/tokens', tag, summary: 'Create a token', permission: 'token:create', body: CreateTokenBody, errors: [409], responses: { 201: { description: 'The token; `data` as the deciding rule shapes it.', schema: TokenResponse } } }),
  op({ method: 'get', path: '/tokens', tag, summary: 'List tokens', description: 'Also `metadata.<key>=<value>` filters. Only tokens the key\'s rules reach are listed.', permission: 'token:read', query: ListTokensQuery, responses: { 200: { description: 'A page of tokens.', schema: TokenList } } }),
  op({ method: 'post', path: '/tokens/search', tag, summary: 'Search tokens', description: '`field:value` terms, ANDed, over id, type, container, fingerprint, metadata.<key> and data (search indexes only). `fingerprint` and `data` terms test the plaintext: they match only tokens the key sees at least masked (token:search and token:read).', permission: 'token:search', body: SearchTokensBody, responses: { 200: { description: 'A page of tokens.', schema: TokenList } } }),
  op({ method: 'get', path: '/tokens/{id}', tag, summary: 'Get a token', permission: 'token:read', params: id, responses: { 200: { description: 'The token.', schema: TokenResponse } } }),
  op({ method: 'patch', path: '/tokens/{id}', tag, summary: 'Update a token', description: 'JSON merge patch; `type` and `id` never change.', permission: 'token:update', params: id, body: UpdateTokenBody, bodyContentTypes: ['application/merge-patch+json'], responses: { 200: { description: 'The token; only its id, tenant, type and modification time for a key without token:read on it.', schema: Type.Union([TokenResponse, UpdatedTokenName]) } } }),
  op({ method: 'delete', path: '/tokens/{id}', tag, summary: 'Delete a token', permission: 'token:delete', params: id, responses: { 204: { description: 'Deleted.' } } }),
  op({ method: 'get', path: '/v2/tokens', tag, summary: 'List tokens (cursor)', description: 'As GET /tokens, paged by cursor: send `pagination.next` back as `start`. A `fingerprint` filter matches only tokens token:read shows at least masked.', permission: 'token:read', query: ListTokensV2Query, responses: { 200: { description: 'A page of tokens.', schema: TokenCursorList } } }),
  op({ method: 'post', path: '/v2/tokens/search', tag, summary: 'Search tokens (cursor)', description: 'As POST /tokens/search, paged by cursor.', permission: 'token:search', body: SearchTokensV2Body, responses: { 200: { description: 'A page of tokens.', schema: TokenCursorList } } }),
  op({ method: 'post', path: '/tokenize', tag, summary: 'Tokenize any JSON', description: 'Every leaf becomes a `token` token, every `{type, data}` object a full token; all or nothing.', permission: 'token:create', body: AnyJson, responses: { 200: { description: 'The same shape with token ids and tokens.', schema: AnyJson } } }),
  op({ method: 'post', path: '/detokenize', tag, summary: 'Detokenize expressions', description: '`{{ <token id> | filter }}` expressions replaced by the tokens\' data, transforms applied.', permission: 'token:read', body: AnyJson, responses: { 200: { description: 'The same shape, filled in.', schema: AnyJson } } }),
  op({ method: 'post', path: '/sessions', tag: 'Sessions', summary: 'Create a session', description: 'A public key; the session acts with what a private Application grants it, within that Application\'s own grants.', responses: { 201: { description: 'The session key and the nonce to authorize it with.', schema: SessionCreated } } }),
  op({ method: 'post', path: '/sessions/authorize', tag: 'Sessions', summary: 'Authorize a session', description: 'A private Application grants the session permissions or rules, no wider than its own (403 naming the excess).', body: AuthorizeSessionBody, errors: [404], responses: { 200: { description: 'Authorized.', schema: SessionAuthorized } } }),
]
