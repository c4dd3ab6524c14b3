import { ApplicationList, ApplicationResponse, CreateApplicationBody, ListApplicationsQuery, UpdateApplicationBody } from '../schemas/applications.js'
import { ApplicationKeyList, ApplicationKeyResponse } from '../schemas/application-keys.js'
import { Uuid } from '../schemas/common.js'
import { CreateTenantBody, CreateTenantResponse, PermissionList, PermissionsQuery, TenantResponse, UpdateTenantBody } from '../schemas/tenants.js'
import { op } from './operation.js'

const id = { id: Uuid }
const keyId = { id: Uuid, keyId: Uuid }

export const applicationOperations = [
  op({ method: 'post', path: '/applications', tag: 'Applications', summary: 'Create an Application', description: 'The answer carries the `key`, shown this once.', permission: 'application:create', body: CreateApplicationBody, responses: { 201: { description: 'The Application, with its key.', schema: ApplicationResponse } } }),
  op({ method: 'get', path: '/applications', tag: 'Applications', summary: 'List Applications', permission: 'application:read', query: ListApplicationsQuery, responses: { 200: { description: 'A page of Applications.', schema: ApplicationList } } }),
  op({ method: 'get', path: '/applications/key', tag: 'Applications', summary: 'The Application of the calling key', permission: 'application:read', responses: { 200: { description: 'The Application.', schema: ApplicationResponse } } }),
  op({ method: 'get', path: '/applications/{id}', tag: 'Applications', summary: 'Get an Application', permission: 'application:read', params: id, responses: { 200: { description: 'The Application.', schema: ApplicationResponse } } }),
  op({ method: 'put', path: '/applications/{id}', tag: 'Applications', summary: 'Update an Application', permission: 'application:update', params: id, body: UpdateApplicationBody, responses: { 200: { description: 'The Application.', schema: ApplicationResponse } } }),
  op({ method: 'post', path: '/applications/{id}/regenerate', tag: 'Applications', summary: 'Regenerate the key', description: 'The old key stops working at once.', permission: 'application:update', params: id, responses: { 200: { description: 'The Application, with its new key.', schema: ApplicationResponse } } }),
  op({ method: 'post', path: '/applications/{id}/keys', tag: 'Applications', summary: 'Create an extra key', description: 'A further live key beside the Application\'s own, for rotation without downtime; the `key` is shown this once. At most 10 per Application (409). Authorized like regenerate.', permission: 'application:update', params: id, errors: [409], responses: { 201: { description: 'The key, with its secret.', schema: ApplicationKeyResponse } } }),
  op({ method: 'get', path: '/applications/{id}/keys', tag: 'Applications', summary: 'List the extra keys', description: 'Metadata only, never the keys.', permission: 'application:read', params: id, responses: { 200: { description: 'Every extra key of the Application (at most 10, no pages).', schema: ApplicationKeyList } } }),
  op({ method: 'get', path: '/applications/{id}/keys/{keyId}', tag: 'Applications', summary: 'Get an extra key', description: 'Metadata only, never the key.', permission: 'application:read', params: keyId, responses: { 200: { description: 'The key\'s metadata.', schema: ApplicationKeyResponse } } }),
  op({ method: 'delete', path: '/applications/{id}/keys/{keyId}', tag: 'Applications', summary: 'Delete an extra key', description: 'The key and the sessions created or authorized with it stop working at once, in every process.', permission: 'application:update', params: keyId, responses: { 204: { description: 'Deleted.' } } }),
  op({ method: 'delete', path: '/applications/{id}', tag: 'Applications', summary: 'Delete an Application', permission: 'application:delete', params: id, responses: { 204: { description: 'Deleted.' } } }),
  op({ method: 'get', path: '/permissions', tag: 'Applications', summary: 'List permissions', description: 'Any valid key.', query: PermissionsQuery, responses: { 200: { description: 'Every permission and the Application types that may hold it.', schema: PermissionList } } }),
  op({ method: 'post', path: '/tenants', tag: 'Tenants', summary: 'Create a tenant (operator)', description: 'Only when SVC_OPERATOR_KEY is set, with that key in SVC-API-KEY; otherwise 404.', body: CreateTenantBody, errors: [404, 409], responses: { 201: { description: 'The tenant and its management Application, with its key.', schema: CreateTenantResponse } } }),
  op({ method: 'get', path: '/tenants/self', tag: 'Tenants', summary: 'The calling key\'s tenant', permission: 'tenant:read', responses: { 200: { description: 'The tenant.', schema: TenantResponse } } }),
  op({ method: 'patch', path: '/tenants/self', tag: 'Tenants', summary: 'Update tenant settings', permission: 'tenant:update', body: UpdateTenantBody, bodyContentTypes: ['application/merge-patch+json'], responses: { 200: { description: 'The tenant.', schema: TenantResponse } } }),
]
