/// The runner's version: `runner --version` prints it, and a default User-Agent can name it.
public enum RunnerVersion {
    /// The version of this build, `MAJOR.MINOR.PATCH`.
    public static let current = "0.1.0"
}
