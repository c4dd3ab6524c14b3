import { Uuid } from '../schemas/common.js'
import { ListProxiesQuery, ProxyBody, ProxyList, ProxyResponse } from '../schemas/proxies.js'
import { ListReactorsQuery, ReactBody, ReactResult, ReactorBody, ReactorList, ReactorResponse } from '../schemas/reactors.js'
import { op } from './operation.js'

const id = { id: Uuid }

export const codeOperations = [
  op({ method: 'post', path: '/reactors', tag: 'Reactors', summary: 'Create a Reactor', permission: 'reactor:create', body: ReactorBody, errors: [422], responses: { 201: { description: 'The Reactor.', schema: ReactorResponse } } }),
  op({ method: 'get', path: '/reactors', tag: 'Reactors', summary: 'List Reactors', permission: 'reactor:read', query: ListReactorsQuery, responses: { 200: { description: 'A page of Reactors.', schema: ReactorList } } }),
  op({ method: 'get', path: '/reactors/{id}', tag: 'Reactors', summary: 'Get a Reactor', permission: 'reactor:read', params: id, responses: { 200: { description: 'The Reactor.', schema: ReactorResponse } } }),
  op({ method: 'put', path: '/reactors/{id}', tag: 'Reactors', summary: 'Replace a Reactor', permission: 'reactor:update', params: id, body: ReactorBody, errors: [422], responses: { 200: { description: 'The Reactor.', schema: ReactorResponse } } }),
  op({ method: 'delete', path: '/reactors/{id}', tag: 'Reactors', summary: 'Delete a Reactor', permission: 'reactor:delete', params: id, responses: { 204: { description: 'Deleted.' } } }),
  op({ method: 'post', path: '/reactors/{id}/react', tag: 'Reactors', summary: 'Invoke a Reactor', description: 'A private key with token:use; expressions in `args` are detokenized first.', permission: 'token:use', params: id, body: ReactBody, errors: [502, 504], responses: { 200: { description: 'What the Reactor returned.', schema: ReactResult } } }),
  op({ method: 'post', path: '/proxies', tag: 'Proxies', summary: 'Create a pre-configured proxy', description: 'The answer carries the proxy `key`, shown this once.', permission: 'proxy:create', body: ProxyBody, errors: [422], responses: { 201: { description: 'The proxy, with its key.', schema: ProxyResponse } } }),
  op({ method: 'get', path: '/proxies', tag: 'Proxies', summary: 'List pre-configured proxies', permission: 'proxy:read', query: ListProxiesQuery, responses: { 200: { description: 'A page of proxies.', schema: ProxyList } } }),
  op({ method: 'get', path: '/proxies/{id}', tag: 'Proxies', summary: 'Get a pre-configured proxy', permission: 'proxy:read', params: id, responses: { 200: { description: 'The proxy.', schema: ProxyResponse } } }),
  op({ method: 'put', path: '/proxies/{id}', tag: 'Proxies', summary: 'Replace a pre-configured proxy', permission: 'proxy:update', params: id, body: ProxyBody, errors: [422], responses: { 200: { description: 'The proxy.', schema: ProxyResponse } } }),
  op({ method: 'delete', path: '/proxies/{id}', tag: 'Proxies', summary: 'Delete a pre-configured proxy', permission: 'proxy:delete', params: id, responses: { 204: { description: 'Deleted.' } } }),
]
