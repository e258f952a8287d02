//! The one error type of the crate, split into what a retry may fix and what it will not.

use domain::Engine;

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("the {0} engine is not running in this renderer: add it to RenderConfig::engines")]
    EngineUnavailable(Engine),

    #[error("the {engine} engine did not start: {reason}")]
    EngineStart { engine: Engine, reason: String },

    #[error(
        "the {engine} engine's browser {program} is missing: install it with scripts/setup.sh"
    )]
    ProgramMissing { engine: Engine, program: String },

    #[error(
        "the {engine} engine is installed but did not get ready in {attempts} attempts of up to \
         {timeout:?} each; last: {last}. The machine may be too busy: retry, or give it more time \
         ([render] start_timeout)"
    )]
    NotReady {
        engine: Engine,
        attempts: u32,
        timeout: std::time::Duration,
        last: Box<RenderError>,
    },

    #[error("the {engine} engine died during a render: {reason}")]
    EngineDied { engine: Engine, reason: String },

    #[error("the {engine} engine hung: {what}")]
    EngineHung { engine: Engine, what: String },

    #[error("the {engine} render did not finish within {timeout:?}")]
    Timeout {
        engine: Engine,
        timeout: std::time::Duration,
    },

    #[error("the {engine} engine refused a command: {method}: {message}")]
    Protocol {
        engine: Engine,
        method: String,
        message: String,
    },

    #[error("the render request is invalid: {0}")]
    InvalidRequest(String),

    #[error("the document could not be drawn: {0}")]
    Document(String),

    #[error(
        "the {engine} engine showed {found} instead of this email, twice; nothing it drew was \
         kept"
    )]
    WrongDocument { engine: Engine, found: String },

    #[error(
        "the {engine} engine drew a blank picture of an email with visible text, twice; \
         nothing it drew was kept"
    )]
    BlankRender { engine: Engine },

    #[error("the screenshot could not be processed: {0}")]
    Image(String),

    #[error("WebKit: {0}")]
    Webkit(#[from] webkit::WebkitError),

    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl RenderError {
    /// True when the same request may succeed on a restarted engine: the engine crashed, hung or
    /// ran out of time. A bad request or a document that cannot be drawn fails again.
    pub fn is_retryable(&self) -> bool {
        match self {
            RenderError::EngineDied { .. }
            | RenderError::EngineHung { .. }
            | RenderError::Timeout { .. } => true,
            RenderError::Webkit(e) => e.is_retryable(),
            _ => false,
        }
    }

    /// The §2.5 bounce code a screenshot gets when this error ends it.
    pub fn bounce_code(&self) -> &'static str {
        match self {
            RenderError::WrongDocument { .. } => "wrong_document",
            RenderError::BlankRender { .. } => "blank_render",
            e if e.is_retryable() => "engine_failure",
            _ => "render_failed",
        }
    }

    /// True when starting the engine again may work: everything but a missing program, a bad
    /// configuration or a file-system problem.
    pub fn is_start_retryable(&self) -> bool {
        match self {
            RenderError::Webkit(e) => !e.is_missing_program(),
            _ => !matches!(
                self,
                RenderError::ProgramMissing { .. }
                    | RenderError::InvalidRequest(_)
                    | RenderError::EngineUnavailable(_)
                    | RenderError::Io { .. }
            ),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> RenderError {
        RenderError::Io {
            context: context.into(),
            source,
        }
    }
}
