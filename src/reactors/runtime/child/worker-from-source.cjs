// Entry of a runtime worker thread when Tessera runs from TypeScript source (tests, `tsx`):
// the TypeScript loader the process was started with reaches a worker thread only through
// `require` from a file entry (not an ES module entry, nor `eval` code), so the worker starts
// here and requires worker.ts. Compiled, worker.js is the entry itself and this file is unused.
/* global require -- CommonJS on purpose, see above */
/* eslint-disable @typescript-eslint/no-require-imports */
'use strict'
require(require('node:worker_threads').workerData.sourceEntry)
