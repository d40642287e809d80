import Foundation
import RunnerTestSupport

/// The peak resident memory of a running child, from `/proc/<pid>/status` (VmHWM, the kernel's
/// high-water mark), read every 10 ms until the child ends; the last value read is its peak.
enum PeakMemory {
    /// Watches `process` until it exits; answers its peak resident memory in bytes (0 if unknown).
    static func watch(_ process: ChildProcess) async -> Int {
        var peak = 0
        while process.isRunning {
            if let value = highWaterMark(pid: process.processIdentifier) {
                peak = max(peak, value)
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return peak
    }

    static func highWaterMark(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            return nil
        }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let fields = line.split(separator: " ")
            if fields.count >= 2, let kilobytes = Int(fields[1]) {
                return kilobytes * 1024
            }
        }
        return nil
    }
}
