// SPDX-License-Identifier: GPL-2.0
// Java methods allocating known amounts of native memory through direct
// ByteBuffers (each ByteBuffer.allocateDirect is one malloc of its size in
// the JVM, Unsafe.allocateMemory). Each is first called often with 1-byte
// buffers (counted too), so that it is compiled by the last tier (run with
// -Xbatch and not inlined: -XX:CompileCommand=dontinline,JavaAllocs::*)
// before it allocates much: a perf map names compiled methods (those in the
// code cache when it is written), interpreted ones are all "Interpreter".
// Buffers are dropped as they come (the JVM frees them after a GC), so the
// figures are bytes allocated. Prints "truth NAME BYTES" per method, then
// "ready PID" and waits for the file named by its first argument (the test
// has the perf map written meanwhile: jcmd PID Compiler.perfmap).
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

public class JavaAllocs {
    static long big, small;
    static ByteBuffer last;

    static void allocBig(int n) {
        last = ByteBuffer.allocateDirect(n);
        big += n;
    }

    static void allocSmall(int n) {
        last = ByteBuffer.allocateDirect(n);
        small += n;
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < 20000; i++) {
            allocBig(1);
            allocSmall(1);
        }
        for (int i = 0; i < 3000; i++)
            allocBig(64 * 1024);
        for (int i = 0; i < 6000; i++)
            allocSmall(16 * 1024);
        System.out.println("truth allocBig " + big);
        System.out.println("truth allocSmall " + small);
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        Path go = Path.of(args[0]);
        while (!Files.exists(go))
            Thread.sleep(50);
    }
}
