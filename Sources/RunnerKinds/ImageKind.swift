import RunnerKit

/// `image`: one image. The payload's own bytes decide the format, never the Content-Type.
public struct ImageKind: JobKind {
    public static let name = "image"
    public static let summary = "Fetches one image (PNG, JPEG, GIF, WebP, BMP, TIFF, ICO, CUR, HEIC, AVIF or JPEG XL, told by its bytes) and reports its format and size."
    public static let parameters: [KindParameter] = ImageCheck.parameters
    public static let accept: String? = ImageCheck().acceptHeader

    /// What the job accepts: formats, the decompression-bomb limit, the least size.
    public let check: ImageCheck

    /// An image job's parameters: what it accepts, by default every format at any size up to
    /// Pillow's pixel limit.
    public init(check: ImageCheck = ImageCheck()) {
        self.check = check
    }

    public init(fields: inout JobFields) throws(JobSpecError) {
        check = try ImageCheck(fields: &fields)
    }

    public func run(in context: JobContext) async throws -> KindOutcome {
        // The Accept header names the formats this job accepts (all of them by default).
        // The header's size is judged as soon as it arrives: a bomb's body is never fetched.
        let fetched = try await context.fetch(folder: "images", accept: check.acceptHeader, inspect: { try check.inspect($0) })
        guard case .fetched(let response) = fetched else {
            return KindOutcome(.notModified, folder: "images", fileExtension: "img")
        }
        let header = try check.check(response)
        return KindOutcome(.body(response), folder: "images", fileExtension: header.format.fileExtension, details: ImageCheck.details(header))
    }
}
