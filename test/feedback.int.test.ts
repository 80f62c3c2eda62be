// Feedback (bounces and complaints) on the embedded stores (test/support/feedback-suite.ts).
import { feedbackSuite } from './support/feedback-suite.ts';

feedbackSuite('embedded', () => ({}));
