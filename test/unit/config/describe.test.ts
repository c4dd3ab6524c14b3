import t from 'tap'
import { describeConfig, loadConfig } from '../../../src/config/index.js'

t.test('`describeConfig` hides URL passwords given as userinfo or as a query parameter the drivers read', async (t) => {
  const described = describeConfig(loadConfig({
    DATABASE_URL: 'postgres://postgres:S3CRETPW1@127.0.0.1:5432/test?password=S3CRETPW2&sslpassword=S3CRETPW3&sslmode=require&sslkey=/etc/tessera/pg.key',
    REDIS_URL: 'redis://redis.local:6379/0?password=S3CRETPW4&sentinelPassword=S3CRETPW5&db=1',
  }))
  t.equal(described.databaseUrl, 'postgres://postgres:hidden@127.0.0.1:5432/test?password=hidden&sslpassword=hidden&sslmode=require&sslkey=%2Fetc%2Ftessera%2Fpg.key')
  t.equal(described.redisUrl, 'redis://redis.local:6379/0?password=hidden&sentinelPassword=hidden&db=1')
  t.notMatch(JSON.stringify(described), 'S3CRETPW')
  t.equal(describeConfig(loadConfig({ DATABASE_URL: 'postgres://u@h/d?sslmode=require' })).databaseUrl, 'postgres://u@h/d?sslmode=require', 'a query without secrets is shown as given')
})
