// SPDX-License-Identifier: GPL-2.0
// JavaScript functions allocating known amounts through Buffers (each
// Buffer.alloc of 256 KiB or 128 KiB is one calloc of node's array buffer
// allocator), kept alive to the end. Prints "truth NAME BYTES" per function.
'use strict';
const keep = [];
const truth = {};

function note(name, b) {
  keep.push(b);
  truth[name] = (truth[name] || 0) + b.length;
}

function allocBig(n) {
  for (let i = 0; i < n; i++)
    note('allocBig', Buffer.alloc(256 * 1024));
}

function allocMedium(n) {
  for (let i = 0; i < n; i++)
    note('allocMedium', Buffer.alloc(128 * 1024));
}

const scale = Number(process.argv[2] || 1);
allocBig(Math.floor(192 * scale));
allocMedium(Math.floor(256 * scale));
for (const k of Object.keys(truth).sort())
  console.log('truth ' + k + ' ' + truth[k]);
