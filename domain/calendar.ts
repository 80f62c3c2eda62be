// The Gregorian calendar's days, for checking dates people write: Date rolls 2026-02-30 over to
// March 2 without a word, so a date is checked against its month before it becomes an instant.

export const isLeapYear = (year: number): boolean => year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);

/** The days of `month` (1 to 12) in `year`. */
export const daysIn = (year: number, month: number): number => (month === 2 ? (isLeapYear(year) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31);
