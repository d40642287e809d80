/// The runner's version: `runner --version` prints it, and the default User-Agent names it.
public enum RunnerVersion {
    /// The version of this build, `MAJOR.MINOR.PATCH`.
    public static let current = "0.1.0"

    /// The User-Agent both HTTP clients send: `runner/<version>`.
    public static var userAgent: String { "runner/\(current)" }
}
