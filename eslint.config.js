import js from '@eslint/js'
import tseslint from 'typescript-eslint'
import { importZones } from './eslint.zones.js'

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'bench/results/**', '.tap/**', 'reactors/**', 'tmp/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', { selector: "MemberExpression[object.name='process'][property.name='env']", message: 'Only src/config reads process.env.' }],
    },
  },
  {
    files: ['src/config/**', 'test/**', 'bench/**', 'migrations/**'],
    rules: { 'no-restricted-syntax': 'off' },
  },
  ...importZones,
)
