import t from 'tap'
import { detectCardBrand, isDigits, passesAbaChecksum, passesLuhn } from '../../../../src/vault/types/index.js'

t.test('Luhn', async (t) => {
  for (const n of ['4242424242424242', '4111111111111111', '378282246310005', '5555555555554444', '6011111111111117', '79927398713']) t.ok(passesLuhn(n), n)
  for (const n of ['4242424242424241', '79927398710', '']) t.notOk(passesLuhn(n), n)
})

t.test('ABA checksum', async (t) => {
  for (const n of ['011000015', '021000021', '026009593', '121000358']) t.ok(passesAbaChecksum(n), n)
  for (const n of ['123456789', '021000022', '02100002', 'abcdefghi', '']) t.notOk(passesAbaChecksum(n), n)
})

t.test('isDigits', async (t) => {
  t.ok(isDigits('0123', 1, 4))
  t.notOk(isDigits('01234', 1, 4))
  t.notOk(isDigits('', 1, 4))
  t.ok(isDigits('', 0, 4))
  t.notOk(isDigits('12a', 1, 4))
  t.notOk(isDigits('١٢٣', 1, 4), 'only ASCII digits')
})

t.test('card brands', async (t) => {
  const cases: [string, string | null][] = [
    ['4242424242424242', 'visa'],
    ['4222222222222', 'visa'],
    ['5555555555554444', 'mastercard'],
    ['2223003122003222', 'mastercard'],
    ['2720990000000000', 'mastercard'],
    ['378282246310005', 'american-express'],
    ['341111111111111', 'american-express'],
    ['6011111111111117', 'discover'],
    ['6221260000000000', 'discover'],
    ['6445644564456445', 'discover'],
    ['6500000000000002', 'discover'],
    ['3530111333300000', 'jcb'],
    ['36227206271667', 'diners-club'],
    ['30569309025904', 'diners-club'],
    ['6200000000000005', 'unionpay'],
    ['6759649826438453', 'maestro'],
    ['5018000000000009', 'maestro'],
    ['9999999999999999', null],
    ['1', null],
    ['', null],
    ['abcd', null],
  ]
  for (const [number, brand] of cases) t.equal(detectCardBrand(number), brand, number)
})
